// Command pico-image builds the pico-connectors container image as a
// tarball, with no container daemon and no Dockerfile: `make image` runs
//
//	go run ./cmd/pico-image --out dist/pico-connectors.oci.tar
//
// The image holds the binary (built with -trimpath, the time zone database
// inside), the shared libraries ldd names for it (librdkafka is linked in
// statically; glibc is not), CA certificates, a user "pico" (65532), its
// working directory /var/lib/pico-connectors, and the OCI labels source,
// version and revision. The tarball is an OCI image layout that is also a
// docker save archive: docker load, podman load and crane push take it.
//
// The same commit gives the same digest on the same build machine: every
// time is SOURCE_DATE_EPOCH (default: the commit's time), entries are
// sorted and owned by fixed ids, and the binary is reproducible. What the
// machine provides (Go, gcc, glibc, the CA bundle) goes in as it is.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pico-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "dist/pico-connectors.oci.tar", "the image tarball to write")
	tag := fs.String("tag", "picomq/pico-connectors:latest", "the name docker load and podman load give the image")
	version := fs.String("version", "", "org.opencontainers.image.version (default: git describe --tags --always --dirty)")
	revision := fs.String("revision", "", "org.opencontainers.image.revision (default: git rev-parse HEAD)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pico-image takes no arguments, got %q\n", fs.Args())
		return 2
	}
	start := time.Now()
	s, err := specFromGit(".", *version, *revision, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(stderr, "pico-image:", err)
		return 1
	}
	s.Tag = *tag
	digest, err := build(s, *out)
	if err != nil {
		fmt.Fprintln(stderr, "pico-image:", err)
		return 1
	}
	st, err := os.Stat(*out)
	if err != nil {
		fmt.Fprintln(stderr, "pico-image:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s, %s (version %s, revision %s, SOURCE_DATE_EPOCH %d), %.1f MB, built in %s\n",
		*out, *tag, digest, s.Version, s.Revision, s.Epoch.Unix(), float64(st.Size())/1e6, time.Since(start).Round(100*time.Millisecond))
	return 0
}

// specFromGit fills a spec from the git checkout at dir: the module root,
// version and revision unless given, and the epoch from SOURCE_DATE_EPOCH
// (epochEnv) or else the time of the last commit.
func specFromGit(dir, version, revision, epochEnv string) (spec, error) {
	root, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return spec{}, err
	}
	s := spec{Root: root, Version: version, Revision: revision, Source: "https://" + sdk.ModulePath}
	if s.Version == "" {
		if s.Version, err = git(root, "describe", "--tags", "--always", "--dirty"); err != nil {
			return spec{}, err
		}
	}
	if s.Revision == "" {
		if s.Revision, err = git(root, "rev-parse", "HEAD"); err != nil {
			return spec{}, err
		}
	}
	if epochEnv == "" {
		if epochEnv, err = git(root, "log", "-1", "--format=%ct"); err != nil {
			return spec{}, err
		}
	}
	secs, err := strconv.ParseInt(epochEnv, 10, 64)
	if err != nil || secs < 0 {
		return spec{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970 (git log -1 --format=%%ct)", epochEnv)
	}
	s.Epoch = time.Unix(secs, 0).UTC()
	return s, nil
}

// git runs git in dir and returns its output, trimmed.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		abs, _ := filepath.Abs(dir)
		return "", fmt.Errorf("git %s in %s: %v %s", strings.Join(args, " "), abs, err, msg)
	}
	return strings.TrimSpace(string(b)), nil
}
