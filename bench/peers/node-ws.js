// Node.js with the `ws` package for bench/websocket: echo at /, broadcast at /chat (every message
// to every socket of /chat), compression off (ws's default for servers). Usage: node node-ws.js PORT
const { WebSocketServer, WebSocket } = require('ws');
const server = new WebSocketServer({ host: '127.0.0.1', port: Number(process.argv[2]), backlog: 4096,
                                     perMessageDeflate: false, clientTracking: false });
const chat = new Set();
server.on('connection', (socket, request) => {
  if (request.url === '/chat') {
    chat.add(socket);
    socket.on('close', () => chat.delete(socket));
    socket.on('message', (data, isBinary) => {
      for (const other of chat) {
        if (other.readyState === WebSocket.OPEN) other.send(data, { binary: isBinary });
      }
    });
  } else {
    socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
  }
  socket.on('error', () => socket.terminate());
});
process.on('SIGTERM', () => process.exit(0));
