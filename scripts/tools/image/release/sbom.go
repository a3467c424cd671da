package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SPDXMediaType is the SBOM's media type, in the registry and on disk.
const SPDXMediaType = "application/spdx+json"

// The SBOM is SPDX 2.3 JSON (https://spdx.github.io/spdx-spec/v2.3/): the
// format GitHub's dependency graph, Trivy and Grype read, and the one
// Kubernetes publishes for its own releases.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	Supplier              string            `json:"supplier"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// SBOMSpec is what the SBOM describes: the image index (by its digest, as
// pushed) and the scaler binary of each platform in it.
type SBOMSpec struct {
	// Repository is where the image is pushed, without tag or digest.
	Repository string
	Version    string
	Digest     v1.Hash
	// Binaries maps a platform ("linux/amd64") to the binary in its image.
	Binaries map[string]string
	// Created is the commit's time, so one commit gives one SBOM.
	Created time.Time
	// Source is the project's repository, the namespace of the document.
	Source string
	// CABundle is the CA bundle file copied into every platform's image;
	// CABundleVersion its package's version where the build host knows it.
	CABundle        string
	CABundleVersion string
}

// caBundleInImage is where the image builder puts the CA bundle.
const caBundleInImage = "/etc/ssl/certs/ca-certificates.crt"

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX element ID from parts: only letters, digits, dots
// and dashes are allowed, so other runs become one dash.
func spdxID(parts ...string) string {
	return "SPDXRef-" + strings.Trim(spdxIDUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-"), "-")
}

// goPURL is a Go module's package URL (purl-spec, type golang).
func goPURL(path, version string) string {
	return "pkg:golang/" + escapePURLPath(path) + "@" + url.PathEscape(version)
}

func escapePURLPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// BuildSBOM reads each binary's Go build information (what `go version
// -m` prints: the main module, every module linked in with its go.sum
// hash, the Go version and build settings) and describes the image as
// containing those binaries, and each binary as depending on its modules
// and the Go standard library it was built with.
func BuildSBOM(s SBOMSpec) ([]byte, error) {
	if len(s.Binaries) == 0 {
		return nil, errors.New("no binary given")
	}
	if s.Repository == "" || s.Version == "" || s.Digest.Hex == "" || s.Source == "" || s.CABundle == "" {
		return nil, errors.New("repository, version, digest, source and CA bundle must all be set")
	}
	name := s.Repository[strings.LastIndex(s.Repository, "/")+1:]
	imageID := spdxID("Image", name)
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        fmt.Sprintf("%s %s", name, s.Version),
		// Unique per image: the digest is in it.
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s-%s-%s", s.Source, name, s.Version, s.Digest.Hex),
		CreationInfo: spdxCreationInfo{
			Created:  s.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: gitea-runner-operator-release (scripts/tools/image/release)"},
		},
		DocumentDescribes: []string{imageID},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID:                imageID,
		Name:                  name,
		VersionInfo:           s.Version,
		Supplier:              "NOASSERTION",
		DownloadLocation:      "NOASSERTION",
		Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: s.Digest.Hex}},
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "Apache-2.0",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "CONTAINER",
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s",
				name, url.QueryEscape(s.Digest.String()), url.QueryEscape(s.Repository), url.QueryEscape(s.Version)),
		}},
		Comment: "The multi-platform image index, by the digest it was pushed with.",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})

	// The CA bundle decides whom the scaler trusts over TLS, so a scanner
	// must see which one shipped.
	ca, err := caBundlePackage(s.CABundle, s.CABundleVersion)
	if err != nil {
		return nil, err
	}
	doc.Packages = append(doc.Packages, ca)
	doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", ca.SPDXID})

	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	modules := map[string]spdxPackage{} // by SPDXID: one entry per module version, shared by the binaries
	for _, platform := range platforms {
		bin, deps, err := binaryPackages(s, platform, s.Binaries[platform])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platform, err)
		}
		doc.Packages = append(doc.Packages, bin)
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", bin.SPDXID})
		for _, d := range deps {
			modules[d.SPDXID] = d
			doc.Relationships = append(doc.Relationships, spdxRelationship{bin.SPDXID, "DEPENDS_ON", d.SPDXID})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// binaryPackages describes one binary and the modules it links.
func binaryPackages(s SBOMSpec, platform, file string) (spdxPackage, []spdxPackage, error) {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return spdxPackage{}, nil, fmt.Errorf("read Go build information of %s: %w", file, err)
	}
	settings := map[string]string{}
	for _, kv := range info.Settings {
		settings[kv.Key] = kv.Value
	}
	if want := "linux/" + settings["GOARCH"]; settings["GOOS"] != "linux" || want != platform {
		return spdxPackage{}, nil, fmt.Errorf("%s was built for %s/%s", file, settings["GOOS"], settings["GOARCH"])
	}
	sum, err := fileSHA256(file)
	if err != nil {
		return spdxPackage{}, nil, err
	}
	var comment []string
	for _, k := range []string{"GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-ldflags", "vcs.revision", "vcs.time", "vcs.modified"} {
		if v, ok := settings[k]; ok {
			comment = append(comment, k+"="+v)
		}
	}
	bin := spdxPackage{
		SPDXID:           spdxID("Binary", info.Path[strings.LastIndex(info.Path, "/")+1:], platform),
		Name:             info.Path[strings.LastIndex(info.Path, "/")+1:],
		VersionInfo:      s.Version,
		Supplier:         "NOASSERTION",
		DownloadLocation: "NOASSERTION",
		Checksums:        []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}},
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  "Apache-2.0",
		CopyrightText:    "NOASSERTION",
		// The binary's own module: its purl carries the platform.
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: goPURL(info.Main.Path, s.Version) + "?goos=linux&goarch=" + settings["GOARCH"],
		}},
		Comment: fmt.Sprintf("%s, package %s of module %s, built by %s (%s)",
			platform, info.Path, info.Main.Path, info.GoVersion, strings.Join(comment, " ")),
	}
	deps := []spdxPackage{modulePackage("stdlib", info.GoVersion, "The Go standard library and runtime the binary was built with.")}
	for _, d := range info.Deps {
		deps = append(deps, depPackage(d))
	}
	return bin, deps, nil
}

// depPackage describes a linked module; a replaced module is described as
// what replaced it, since that is what the binary holds.
func depPackage(d *debug.Module) spdxPackage {
	m := d
	var note string
	if d.Replace != nil {
		m = d.Replace
		note = fmt.Sprintf("Replaces %s %s. ", d.Path, d.Version)
	}
	if m.Sum != "" {
		// go.sum's h1: hash is a SHA-256 over the module's file list, not
		// over one file, so it is no SPDX checksum; it is kept here.
		note += "go.sum " + m.Sum
	}
	return modulePackage(m.Path, m.Version, strings.TrimSpace(note))
}

func modulePackage(path, version, comment string) spdxPackage {
	// Flattening the path to an ID can make two paths one (a/b, a-b): a
	// short hash of the exact path and version keeps them apart.
	h := sha256.Sum256([]byte(path + "@" + version))
	return spdxPackage{
		SPDXID:                spdxID("Go", path, version, hex.EncodeToString(h[:4])),
		Name:                  path,
		VersionInfo:           version,
		Supplier:              "NOASSERTION",
		DownloadLocation:      "NOASSERTION",
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "NOASSERTION",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: goPURL(path, version),
		}},
		Comment: comment,
	}
}

func caBundlePackage(file, version string) (spdxPackage, error) {
	sum, err := fileSHA256(file)
	if err != nil {
		return spdxPackage{}, fmt.Errorf("CA bundle: %w", err)
	}
	if version == "" {
		version = "NOASSERTION"
	}
	return spdxPackage{
		SPDXID:                "SPDXRef-File-ca-certificates.crt",
		Name:                  "ca-certificates",
		VersionInfo:           version,
		Supplier:              "NOASSERTION",
		DownloadLocation:      "NOASSERTION",
		Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}},
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "NOASSERTION",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "FILE",
		Comment:               fmt.Sprintf("The CA bundle at %s in every platform's image, copied from the build host's %s.", caBundleInImage, file),
	}, nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
