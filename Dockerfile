# sxe-httpd in a container:
#   docker build -t sxe-httpd .
#   docker run --rm -p 8080:8080 -v "$PWD/www:/srv/www:ro" sxe-httpd
# serves /srv/www on port 8080 as an unprivileged user, one worker per CPU the container may use.
# A configuration file instead: -v "$PWD/sxe-httpd.yaml:/etc/sxe-httpd.yaml:ro" and the arguments
# `-c /etc/sxe-httpd.yaml` (docker kill -s HUP reloads it without dropping a request). The counters:
#   docker exec CONTAINER sxe-httpctl -s /tmp/sxe-httpd.control status

# The build: the library and the programs, without the tests or the benchmarks.
FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev cmake ninja-build pkgconf \
      libssl-dev libnghttp2-dev libyaml-dev libbrotli-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSXE_BUILD_TESTS=OFF \
      -DSXE_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX=/usr \
 && cmake --build /build \
 && DESTDIR=/out cmake --install /build

# What runs: the two programs, the libraries they link and the system's MIME types.
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libnghttp2-14 libyaml-0-2 libbrotli1 media-types \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/bin/sxe-httpd /out/usr/bin/sxe-httpctl /usr/bin/
COPY --from=build /out/usr/share/man/man1/ /usr/share/man/man1/
RUN mkdir -p /srv/www
USER www-data
EXPOSE 8080
# docker stop sends this: the workers finish what they hold (up to 5 s), then the server exits
STOPSIGNAL SIGQUIT
ENTRYPOINT ["sxe-httpd", "--control", "/tmp/sxe-httpd.control"]
CMD ["--root", "/srv/www", "--listen", "0.0.0.0:8080"]
