# syntax=docker/dockerfile:1
#
# regosched: Kubernetes scheduler extender.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/regosched/regosched:dev .
# The Rego policy in rego/ is embedded into the binary at build time.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
WORKDIR /src

# Dependencies first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

# Sources (what .dockerignore lets through: cmd/, internal/, rego/, root *.go).
COPY . .

ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/regosched ./cmd/regosched

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="regosched" \
      org.opencontainers.image.description="Kubernetes scheduler extender driven by Rego policies" \
      org.opencontainers.image.source="https://github.com/regosched/regosched" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=builder /out/regosched /regosched
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["/regosched"]
CMD ["serve"]
