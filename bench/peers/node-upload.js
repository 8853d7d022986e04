// node.js http taking uploads for bench/all: PUT /NAME stores the body as DIR/NAME, streamed to the
// file as it comes, then 201, as examples/upload does. Usage: node node-upload.js PORT DIR
const fs = require('fs');
const http = require('http');
const path = require('path');
const dir = process.argv[3];
const server = http.createServer((request, response) => {
  const name = request.url.slice(1);
  if (request.method !== 'PUT' || name === '' || name.includes('/') || name.startsWith('.')) {
    response.writeHead(400, {'Content-Length': 0});
    response.end();
    return;
  }
  const out = fs.createWriteStream(path.join(dir, name));
  request.pipe(out);
  out.on('finish', () => {
    const text = `stored ${out.bytesWritten} bytes\n`;
    response.writeHead(201, {'Content-Type': 'text/plain', 'Content-Length': text.length});
    response.end(text);
  });
  out.on('error', () => {
    response.writeHead(500, {'Content-Length': 0});
    response.end();
  });
});
server.keepAliveTimeout = 300000;  // a benchmark connection lives for the whole run (default 5 s)
server.headersTimeout = 301000;    // must exceed keepAliveTimeout
server.listen(Number(process.argv[2]), '127.0.0.1', 4096);
process.on('SIGTERM', () => process.exit(0));
