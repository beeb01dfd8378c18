// plotly.js with the trace types fusedbench's report draws: scatter (in the core), heatmap and box.
var Plotly = require('plotly.js/src/core');
Plotly.register([require('plotly.js/src/traces/heatmap'), require('plotly.js/src/traces/box')]);
module.exports = Plotly;
