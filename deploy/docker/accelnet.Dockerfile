# accelnet (controller, `accelnet etcd`, `accelnet probe`), accelnetctl and
# accelnet-kube (the Kubernetes side, its own binary):
# static binaries on an empty image, running as an unprivileged user.
#
#   docker build -f deploy/docker/accelnet.Dockerfile -t accelnet:dev .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/bin/ ./cmd/accelnet ./cmd/accelnetctl ./cmd/accelnet-kube \
 && mkdir -p /out/data /out/certs /out/tmp && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
# Owned by the runtime user, so the certs volume mounted here is writable
# by `accelnet certs` and readable by every service (same user).
COPY --from=build --chown=65532:65532 /out/certs /certs
COPY --from=build /out/tmp /tmp
COPY deploy/topologies /etc/accelnet/topologies
USER 65532:65532
WORKDIR /data
# REST API, dashboard and /metrics; etcd client and peer (accelnet etcd);
# accelnet-kube's /healthz, /readyz and /metrics.
EXPOSE 8080 2379 2380 8090
ENTRYPOINT ["/usr/local/bin/accelnet"]
CMD ["serve", "--help"]
