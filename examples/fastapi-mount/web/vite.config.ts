import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run build` writes dist/, which main.py serves at /. `npm run dev` serves the page
// at http://localhost:5173 and passes /api (HTTP and WebSocket) to the Python server
// (port 8000, or THINWIRE_URL).
export default defineConfig({
  plugins: [react()],
  server: {
    proxy: {
      "/api": { target: process.env.THINWIRE_URL ?? "http://127.0.0.1:8000", ws: true },
    },
  },
});
