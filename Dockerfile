# syntax=docker/dockerfile:1
# The scaler image: a static Go binary on distroless, running as non-root
# (UID 65532) so the chart's default listener pod passes Pod Security
# Admission "restricted" and readOnlyRootFilesystem.
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

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gitea-runner-scaler /usr/local/bin/gitea-runner-scaler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gitea-runner-scaler"]
CMD ["run"]
