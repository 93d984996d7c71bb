// Bundles the render-count page (React included, in its production build) into a folder.
//
//   node src/build-page.mjs OUT_DIR   ->   OUT_DIR/index.html, OUT_DIR/page.js
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";

import { thinwirePackages } from "./thinwire-packages.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const out = path.resolve(process.argv[2] ?? path.join(here, "..", "page"));

// One React for the page and @thinwire/react: this folder's.
const oneReact = {
  name: "one-react",
  setup(build) {
    build.onResolve({ filter: /^(react|react-dom|scheduler)(\/.*)?$/ }, (args) => ({
      path: require.resolve(args.path),
    }));
  },
};

mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: [path.join(here, "render-page.jsx")],
  outfile: path.join(out, "page.js"),
  bundle: true,
  minify: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  jsx: "automatic",
  plugins: [thinwirePackages, oneReact],
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
});
writeFileSync(
  path.join(out, "index.html"),
  '<!doctype html>\n<html><head><meta charset="utf-8"><title>thinwire render bench</title></head>\n' +
    '<body><div id="root"></div><script type="module" src="page.js"></script></body></html>\n',
);
process.stdout.write(`${out}\n`);
