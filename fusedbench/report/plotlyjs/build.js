// `npm ci && npm run build`: plotly-fusedbench.min.js, with plotly.js's own esbuild settings (its
// esbuild-config.js), minified; the CSS of map subplots, which this bundle never registers, left out.
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { dependencies } = require('./package.json');

esbuild.build({
  entryPoints: ['entry.js'],
  outfile: 'plotly-fusedbench.min.js',
  format: 'iife',
  globalName: 'Plotly',
  bundle: true,
  minify: true,
  legalComments: 'eof',
  banner: { js: `/** plotly.js (scatter, heatmap, box - minified) v${dependencies['plotly.js']}, built by fusedbench */` },
  plugins: [environmentPlugin({ NODE_DEBUG: false })],
  loader: { '.css': 'empty' },
  define: { global: 'window', 'define.amd': 'false' },
  target: 'es2016',
}).catch(() => process.exit(1));
