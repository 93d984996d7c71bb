import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The Python server serves dist/ as it is: index.html at / and the files beside it.
// Relative asset paths ("./") let the page work under any mount prefix too.
export default defineConfig({
  base: "./",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
  },
});
