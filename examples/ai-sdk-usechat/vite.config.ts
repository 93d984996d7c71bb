import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run dev` serves the page at http://localhost:5173 and passes /ai-sdk to the Python
// server (`thinwire serve agents:app`, port 8000). No changeOrigin: the server must see
// the page's own Host, or it takes the page for another site's and refuses what it sends.
export default defineConfig({
  plugins: [react()],
  server: {
    proxy: {
      "/ai-sdk": { target: process.env.THINWIRE_URL ?? "http://127.0.0.1:8000" },
    },
  },
});
