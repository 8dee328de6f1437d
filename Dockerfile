# syntax=docker/dockerfile:1
#
# regosched: Kubernetes scheduler extender (the default target).
#   docker build --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/regosched/regosched:dev .
# regosched-scheduler: kube-scheduler with regosched as a framework plugin.
#   docker build --target regosched-scheduler -t ghcr.io/regosched/regosched-scheduler:dev .
# The Rego policy in rego/ is embedded into both binaries at build time.
#
# Base images are pinned by digest (issue 34): a tag can be moved to other
# content, a digest cannot, so a rebuild of a commit starts from the same
# bytes. The tag stays in front of the digest for readers and for Renovate
# or Dependabot, which bump both together. The digests were not read from
# the registries here (this machine has no network to them); they are
# published ones, taken from public Dockerfiles that pin the same tags:
#   golang:1.26.8-bookworm, as pinned for `--platform=$BUILDPLATFORM`
#     builders in public Dockerfiles since docker-library's Go 1.26.8 update
#     (docker-library/official-images#22183, 2026-09-01);
#   gcr.io/distroless/static-debian12:nonroot as of 2026-08-26, pinned as
#     the manifest-list digest in public Dockerfiles (e.g. 386jp/mcp-profiles,
#     Quad4-Software/quickchat).
# Check, and update, both with the registry before a release:
#   crane digest golang:1.26.8-bookworm
#   crane digest gcr.io/distroless/static-debian12:nonroot
# The builder follows go.mod's Go (1.26); a static binary (CGO_ENABLED=0)
# does not depend on the builder's Debian release.

FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS builder
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

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab AS regosched-scheduler
ARG VERSION=dev
LABEL org.opencontainers.image.title="regosched-scheduler" \
      org.opencontainers.image.description="kube-scheduler with regosched's Rego placement rules as a framework plugin" \
      org.opencontainers.image.source="https://github.com/regosched/regosched" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=scheduler-builder /out/regosched-scheduler /regosched-scheduler
USER 65532:65532
ENTRYPOINT ["/regosched-scheduler"]

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
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
