// The live view: every Workspace of this home, a live tab and the hand-offs waiting for the
// person, who may take the watched tab over (their clicks, wheel and keys on its picture go to
// the tab through the Broker) and hand it back. Everything shown is text the Broker already
// masked; it is written with textContent only, so a page's title or URL can never become
// markup here.
(function () {
  'use strict';
  var token = null;
  var watched = null; // {workspaceId, targetId}
  var frames = 0;
  var statusLine = document.getElementById('status');

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === 'text') node.textContent = attrs[key];
      else if (key === 'className') node.className = attrs[key];
      else node.setAttribute(key, attrs[key]);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function api(method, path, body) {
    var init = { method: method, headers: { 'X-BP-Token': token } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      return response.json().then(function (value) {
        if (!response.ok) throw new Error((value && value.error && (value.error.message || value.error)) || response.status);
        return value;
      });
    });
  }

  function query(params) {
    return Object.keys(params).filter(function (k) { return params[k]; }).map(function (k) {
      return encodeURIComponent(k) + '=' + encodeURIComponent(params[k]);
    }).join('&');
  }

  function summary(command) {
    if (command.error) return (command.error.code || '') + ' ' + (command.error.message || '');
    var evidence = command.evidence;
    if (!evidence) return '';
    var parts = [];
    ['status', 'action', 'reason'].forEach(function (key) { if (evidence[key]) parts.push(evidence[key]); });
    if (evidence.url) parts.push(evidence.url);
    return parts.join(' · ');
  }

  function renderWorkspace(workspace) {
    var leases = workspace.leases.map(function (l) { return l.leaseId; }).join(', ') || 'none';
    var rows = workspace.tabs.map(function (tab) {
      var badges = [];
      if (tab.dialog) badges.push(el('span', { className: 'badge warn', text: tab.dialog.type + ': ' + tab.dialog.message }));
      var watch = el('button', { text: 'Watch', 'data-watch': tab.targetId });
      watch.addEventListener('click', function () {
        watched = { workspaceId: workspace.workspaceId, targetId: tab.targetId, title: tab.title, url: tab.url };
        setHeld(!!tab.human);
        document.getElementById('watch').hidden = false;
        refreshWatch();
      });
      return el('tr', { 'data-target-id': tab.targetId }, [
        el('td', {}, [el('div', { text: tab.title || '(untitled)' }), el('div', { className: 'url', text: tab.url })].concat(badges)),
        el('td', { text: (tab.human ? 'you (taken over)' : (tab.controlledBy || 'free')) + (tab.managed ? ' · managed' : ' · user tab') }),
        el('td', { text: tab.requests + ' req · ' + tab.downloads + ' dl' }),
        el('td', {}, [watch]),
      ]);
    });
    var commands = workspace.commands.map(function (command) {
      return el('li', { 'data-command-id': command.commandId }, [
        el('span', { text: command.method + ' ' }),
        el('span', { className: 'status-' + command.status, text: command.status }),
        el('span', { className: 'meta', text: ' ' + summary(command) }),
      ]);
    });
    return el('article', { className: 'workspace', 'data-workspace-id': workspace.workspaceId }, [
      el('h2', { text: workspace.client.id + ' (' + workspace.client.instanceId + ')' }),
      el('p', { className: 'meta', text: workspace.workspaceId + ' · browser ' + workspace.browserId + ' · leases: ' + leases }),
      el('table', {}, [
        el('thead', {}, [el('tr', {}, [el('th', { text: 'Tab' }), el('th', { text: 'Controlled by' }), el('th', { text: 'Activity' }), el('th', { text: '' })])]),
        el('tbody', {}, rows),
      ]),
      el('h3', { text: 'Commands' }),
      el('ol', { className: 'log', reversed: '' }, commands),
    ]);
  }

  function renderHandoffs(handoffs) {
    var box = document.getElementById('handoffs');
    box.textContent = '';
    (handoffs || []).forEach(function (handoff) {
      var note = el('input', { type: 'text', placeholder: 'optional note for the agent', 'aria-label': 'note', maxlength: '500' });
      var done = el('button', { className: 'primary', text: 'Done', 'data-handoff-done': handoff.handoffId });
      done.addEventListener('click', function () {
        done.disabled = true;
        api('POST', '/api/handoff/done', { handoffId: handoff.handoffId, note: note.value || null }).then(refresh, function (error) {
          done.disabled = false;
          statusLine.textContent = 'hand-off: ' + error.message;
        });
      });
      var watch = el('button', { text: 'Watch the tab' });
      watch.addEventListener('click', function () {
        watched = { workspaceId: handoff.workspaceId, targetId: handoff.targetId, title: '', url: '' };
        setHeld(false);
        document.getElementById('watch').hidden = false;
        refreshWatch();
      });
      box.appendChild(el('div', { className: 'handoff', 'data-handoff-id': handoff.handoffId }, [
        el('strong', { text: 'An agent asks for you: ' }),
        el('span', { text: handoff.reason }),
        watch, note, done,
      ]));
    });
  }

  var lastState = '';
  function refresh() {
    return api('GET', '/api/state').then(function (state) {
      var text = JSON.stringify(state);
      statusLine.textContent = state.note || (state.workspaces.length + ' active Workspace(s)');
      if (text === lastState) return;
      lastState = text;
      var list = document.getElementById('workspaces');
      list.textContent = '';
      state.workspaces.forEach(function (workspace) { list.appendChild(renderWorkspace(workspace)); });
      if (!state.workspaces.length) list.appendChild(el('p', { className: 'note', text: 'No active Workspace.' }));
      renderHandoffs(state.handoffs);
      if (watched) {
        state.workspaces.forEach(function (w) {
          w.tabs.forEach(function (t) {
            if (w.workspaceId === watched.workspaceId && t.targetId === watched.targetId) {
              watched.title = t.title; watched.url = t.url;
            }
          });
        });
      }
    }, function (error) { statusLine.textContent = 'cannot read the Broker: ' + error.message; });
  }

  function refreshWatch() {
    if (!watched) return Promise.resolve();
    document.getElementById('watch-title').textContent = watched.title || watched.targetId;
    document.getElementById('watch-url').textContent = watched.url || '';
    return api('GET', '/api/events?' + query({ workspaceId: watched.workspaceId, targetId: watched.targetId })).then(function (page) {
      var list = document.getElementById('events');
      list.textContent = '';
      page.events.forEach(function (event) {
        var payload = JSON.stringify(event.payload);
        if (payload.length > 300) payload = payload.slice(0, 300) + '…';
        list.appendChild(el('li', { text: new Date(event.timestamp).toLocaleTimeString() + ' ' + event.type + ' ' + payload }));
      });
    }, function () {});
  }

  // Take-over: while the person holds the watched tab, their input on its picture is sent in
  // order, one step at a time, as fractions of the picture (the Broker scales to the tab).
  var held = false;
  var inputs = 0;
  var sending = Promise.resolve();
  var watchBox = document.getElementById('watch');
  var img = document.getElementById('frame');
  var controlNote = document.getElementById('control-note');

  function setHeld(value) {
    held = value;
    watchBox.setAttribute('data-held', value ? 'true' : 'false');
    document.getElementById('takeover').hidden = value;
    document.getElementById('handback').hidden = !value;
    controlNote.textContent = value ? 'You control this tab: agents wait until you hand it back.' : '';
  }

  function tabParams() {
    return { workspaceId: watched.workspaceId, targetId: watched.targetId };
  }

  function send(step) {
    if (!held || !watched) return;
    var body = Object.assign(tabParams(), step);
    sending = sending.then(function () {
      return api('POST', '/api/input', body).then(function () {
        inputs += 1;
        img.setAttribute('data-inputs', String(inputs));
      }, function (error) { controlNote.textContent = 'input: ' + error.message; });
    });
  }

  function fractions(event) {
    var rect = img.getBoundingClientRect();
    var clamp = function (v) { return Math.min(1, Math.max(0, v)); };
    return { x: clamp((event.clientX - rect.left) / rect.width), y: clamp((event.clientY - rect.top) / rect.height) };
  }

  img.addEventListener('click', function (event) {
    if (!held) return;
    var at = fractions(event);
    img.focus();
    send({ type: 'click', x: at.x, y: at.y, button: 'left' });
  });
  img.addEventListener('wheel', function (event) {
    if (!held) return;
    event.preventDefault();
    var at = fractions(event);
    send({ type: 'wheel', x: at.x, y: at.y, dx: event.deltaX, dy: event.deltaY });
  }, { passive: false });
  img.addEventListener('keydown', function (event) {
    if (!held || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === 'Shift' || event.key === 'Control' || event.key === 'Alt' || event.key === 'Meta') return;
    event.preventDefault();
    send({ type: 'key', key: event.key });
  });
  document.getElementById('takeover').addEventListener('click', function () {
    if (!watched) return;
    controlNote.textContent = 'taking over…';
    api('POST', '/api/takeover', tabParams()).then(function () { setHeld(true); img.focus(); refresh(); },
      function (error) { controlNote.textContent = 'take-over: ' + error.message; });
  });
  document.getElementById('handback').addEventListener('click', function () {
    if (!watched) return;
    sending.then(function () {
      return api('POST', '/api/handback', tabParams());
    }).then(function (back) {
      setHeld(false);
      var e = back.evidence || {};
      controlNote.textContent = 'Handed back' + (e.documentChanged ? ' (the page changed)' : '') + '.';
      watchBox.setAttribute('data-handed-back', 'true');
      refresh();
    }, function (error) { controlNote.textContent = 'hand-back: ' + error.message; });
  });

  // Recording: the Broker samples the watched tab and, at Stop, stores one HTML player as an
  // Artifact of the tab's Workspace.
  var recording = null;
  var recordButton = document.getElementById('record');
  recordButton.addEventListener('click', function () {
    if (!watched) return;
    recordButton.disabled = true;
    var path = recording ? '/api/recording/stop' : '/api/recording/start';
    var params = recording || tabParams();
    api('POST', path, params).then(function (answer) {
      if (recording) {
        recording = null;
        recordButton.textContent = 'Record';
        controlNote.textContent = 'Recording saved: ' + answer.artifact.id + ' (' + answer.frames + ' frames; export it with artifacts/export from its Workspace).';
      } else {
        recording = params;
        recordButton.textContent = 'Stop recording';
        controlNote.textContent = 'Recording…';
      }
    }, function (error) { controlNote.textContent = 'recording: ' + error.message; }).then(function () { recordButton.disabled = false; });
  });

  // The live channel: a WebSocket to the view's server for the watched tab, whose first
  // message carries the token; the server pushes each new screencast frame. Watching another
  // tab closes it and opens another; a closed one is opened again a second later.
  var channel = null;
  var channelFor = null;

  function openChannel(tab, key) {
    var note = document.getElementById('frame-note');
    var socket = new WebSocket('ws://' + window.location.host + '/api/live');
    channel = socket;
    socket.onopen = function () {
      socket.send(JSON.stringify({ token: token, workspaceId: tab.workspaceId, targetId: tab.targetId }));
    };
    socket.onmessage = function (message) {
      var frame = JSON.parse(message.data);
      if (frame.data) {
        img.src = 'data:' + (frame.mimeType || 'image/jpeg') + ';base64,' + frame.data;
        frames += 1;
        img.setAttribute('data-frames', String(frames));
        note.textContent = '';
      } else {
        note.textContent = frame.reason || frame.error || 'no frame yet';
      }
    };
    socket.onclose = function () {
      if (channel !== socket) return;
      channel = null;
      setTimeout(function () { if (channelFor === key) channelFor = null; }, 1000);
    };
  }

  function liveLoop() {
    var key = watched ? watched.workspaceId + ' ' + watched.targetId : null;
    if (key !== channelFor) {
      if (channel) { var old = channel; channel = null; old.close(); }
      channelFor = key;
      if (watched) openChannel(watched, key);
    }
    setTimeout(liveLoop, 250);
  }

  window.bpSession.then(function (value) {
    if (!value) {
      statusLine.textContent = 'This address is spent: run `browser-pilot view` for a new one.';
      document.body.setAttribute('data-refused', 'true');
      return;
    }
    token = value;
    document.body.setAttribute('data-ready', 'true');
    refresh();
    setInterval(refresh, 1000);
    setInterval(refreshWatch, 1000);
    liveLoop();
  });
})();
