#!/usr/bin/env node
// The `browser-pilot-conformance` bin: the black-box runner, through the launcher in cli.js.
'use strict';
require('./cli.js').run('browser-pilot-conformance');
