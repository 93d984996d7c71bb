export function Footer() {
  return (
    <footer className="footer">
      <p>Memory lives on the server; this page stores only the conversation id.</p>
    </footer>
  );
}
