// node.js http "Hello World" for bench/compare: one process. Usage: node node-hello.js PORT
const http = require('http');
const server = http.createServer((request, response) => {
  response.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': 12});
  response.end('Hello World\n');
});
server.keepAliveTimeout = 300000;
server.headersTimeout = 301000;
server.listen(Number(process.argv[2]), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
