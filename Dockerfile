# syntax=docker/dockerfile:1
#
# regosched: Kubernetes scheduler extender (the default target).
#   docker build --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/regosched/regosched:dev .
# regosched-scheduler: kube-scheduler with regosched as a framework plugin.
#   docker build --target regosched-scheduler -t ghcr.io/regosched/regosched-scheduler:dev .
# The Rego policy in rego/ is embedded into both binaries at build time.

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

# The plugin scheduler is its own module (scheduler/), so that
# k8s.io/kubernetes stays out of the extender's.
FROM builder AS scheduler-builder
WORKDIR /src/scheduler
ARG TARGETOS
ARG TARGETARCH
RUN go mod download
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o /out/regosched-scheduler ./cmd/regosched-scheduler

FROM gcr.io/distroless/static-debian12:nonroot AS regosched-scheduler
ARG VERSION=dev
LABEL org.opencontainers.image.title="regosched-scheduler" \
      org.opencontainers.image.description="kube-scheduler with regosched's Rego placement rules as a framework plugin" \
      org.opencontainers.image.source="https://github.com/regosched/regosched" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=scheduler-builder /out/regosched-scheduler /regosched-scheduler
USER 65532:65532
ENTRYPOINT ["/regosched-scheduler"]

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
