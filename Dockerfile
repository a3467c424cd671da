# syntax=docker/dockerfile:1
# The scaler image for those with Docker. `make image` builds the same image
# without Docker (scripts/tools/image; its dockerfile_test.go holds the two
# together): from scratch, the static binary, Debian's CA bundle, and
# /etc/passwd and /etc/group naming the non-root user 65532 that the chart's
# securityContext runs, so the listener pod passes Pod Security Admission
# "restricted" and readOnlyRootFilesystem.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t gitea-runner-scaler .
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/gitea-runner-operator/gitea-runner-operator/internal/cli.Version=${VERSION}" \
      -o /out/gitea-runner-scaler ./cmd/gitea-runner-scaler

FROM scratch
COPY scripts/tools/image/rootfs/ /
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/gitea-runner-scaler /usr/local/bin/gitea-runner-scaler
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/gitea-runner-operator/gitea-runner-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.title="gitea-runner-scaler"
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gitea-runner-scaler"]
CMD ["run"]
