// Resolves @thinwire/client and @thinwire/react to the built packages (packages/*/dist),
// whichever node_modules would (or would not) link them.
import path from "node:path";
import { fileURLToPath } from "node:url";

const packages = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const thinwirePackages = {
  name: "thinwire-dist",
  setup(build) {
    build.onResolve({ filter: /^@thinwire\/(client|react)$/ }, (args) => ({
      path: path.join(packages, args.path.slice("@thinwire/".length), "dist", "index.js"),
    }));
  },
};
