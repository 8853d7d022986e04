// node.js `net` with a canned reply for bench/compare: the reply and request counting of
// bench/epoll-floor, one process. Usage: node node-net.js PORT
const net = require('net');
const reply = Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\n' +
                          'Hello World\n');
const replies = [reply];
for (let i = 2; i <= 64; i++) replies.push(Buffer.concat([replies[i - 2], reply]));
const end = [13, 10, 13, 10];  // "\r\n\r\n"

const server = net.createServer((socket) => {
  let matched = 0;  // bytes of "\r\n\r\n" seen at the end of the input so far
  socket.setNoDelay(true);
  socket.on('data', (data) => {
    let count = 0;
    for (let i = 0; i < data.length; i++) {
      const c = data[i];
      matched = c === end[matched] ? matched + 1 : (c === 13 ? 1 : 0);
      if (matched === 4) {
        matched = 0;
        if (++count === 64) {
          socket.write(replies[63]);
          count = 0;
        }
      }
    }
    if (count > 0) socket.write(replies[count - 1]);
  });
  socket.on('error', () => socket.destroy());
});
server.listen(Number(process.argv[2]), '127.0.0.1', 4096);
process.on('SIGTERM', () => process.exit(0));
