#!/usr/bin/env node
// The `bp` bin: the human CLI, through the launcher in cli.js.
'use strict';
require('./cli.js').run('bp');
