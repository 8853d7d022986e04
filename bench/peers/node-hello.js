// node.js http "Hello World" for bench/all, as a node user runs it on N cores: one process, or
// the cluster module's master and N workers sharing the port. Usage: node node-hello.js PORT [N]
const cluster = require('cluster');
const http = require('http');
const workers = Number(process.argv[3] || 1);
if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const id in cluster.workers) cluster.workers[id].kill();
    process.exit(0);
  });
} else {
  const server = http.createServer((request, response) => {
    response.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': 12});
    response.end('Hello World\n');
  });
  server.keepAliveTimeout = 300000;  // idle connections of the memory scenario stay open (default 5 s)
  server.headersTimeout = 301000;    // must exceed keepAliveTimeout
  server.listen(Number(process.argv[2]), '127.0.0.1', 4096);  // backlog: the 10,000-connection ramp
  process.on('SIGTERM', () => process.exit(0));
}
