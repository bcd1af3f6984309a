# fabricsim, the emulated fabric: a static binary on an empty image,
# running as an unprivileged user. It writes the topology with its
# switches' addresses to a shared volume for accelnet to read.
#
#   docker build -f deploy/docker/fabricsim.Dockerfile -t accelnet-fabricsim:dev .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/bin/ ./cmd/fabricsim \
 && mkdir -p /out/shared /out/tmp && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /out/bin/ /usr/local/bin/
# Owned by the runtime user, so a named volume mounted here is writable.
COPY --from=build --chown=65532:65532 /out/shared /shared
COPY --from=build /out/tmp /tmp
COPY deploy/topologies /etc/accelnet/topologies
USER 65532:65532
# Control API (its token in -token-file); each switch serves P4Runtime and
# gNMI on a port of its own.
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/fabricsim"]
