import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The Python server renders its own HTML shell from dist/.vite/manifest.json
// (entry "index.html") and serves dist/assets/* at /assets/*.
export default defineConfig({
  base: "/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    manifest: true,
    assetsDir: "assets",
  },
});
