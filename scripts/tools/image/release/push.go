package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refName is how scripts/tools/image names the index in the layout's
// index.json (the version).
const refName = "org.opencontainers.image.ref.name"

// LayoutIndex finds the image index named version in an OCI image layout
// written by `make image`.
func LayoutIndex(dir, version string) (v1.ImageIndex, v1.Hash, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("read the OCI layout %s: %w", dir, err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		if d.Annotations[refName] == version {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, v1.Hash{}, fmt.Errorf("the OCI layout %s has %d images named %q, want 1 (was it built with VERSION=%s?)", dir, len(found), version, version)
	}
	if !found[0].MediaType.IsIndex() {
		return nil, v1.Hash{}, fmt.Errorf("%q in %s is a %s, want an image index", version, dir, found[0].MediaType)
	}
	idx, err := root.ImageIndex(found[0].Digest)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	return idx, found[0].Digest, nil
}

// options: credentials as docker and crane find them (DOCKER_CONFIG's
// config.json, credential helpers); plain HTTP only when asked.
func nameOptions(plainHTTP bool) []name.Option {
	opts := []name.Option{name.StrictValidation}
	if plainHTTP {
		opts = append(opts, name.Insecure)
	}
	return opts
}

// PushIndex pushes the index to repository:tag and returns its digest,
// which is the one in the layout: pushing changes no byte.
func PushIndex(idx v1.ImageIndex, repository, tag string, plainHTTP bool) (name.Digest, error) {
	ref, err := name.NewTag(repository+":"+tag, nameOptions(plainHTTP)...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image reference: %w", err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return ref.Context().Digest(d.String()), nil
}

// Attach pushes content as an OCI artifact whose subject is the image
// (OCI image spec 1.1): a registry with the referrers API lists it there,
// and for one without (distribution's registry today), go-containerregistry
// keeps the referrers tag (sha256-<hex of the subject>) up to date, which
// is where `oras discover`, `crane` and cosign look. It returns the
// artifact's digest.
func Attach(subject name.Digest, content []byte, mediaType types.MediaType, title string) (name.Digest, error) {
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	desc, err := remote.Head(subject, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("the subject %s: %w", subject, err)
	}
	empty := static.NewLayer([]byte("{}"), types.OCIEmptyJSON)
	blob := static.NewLayer(content, mediaType)
	for _, l := range []v1.Layer{empty, blob} {
		if err := remote.WriteLayer(subject.Context(), l, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("push a blob of the artifact: %w", err)
		}
	}
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  string(mediaType),
		Config:        descriptorOf(empty, []byte("{}")),
		Layers: []v1.Descriptor{func() v1.Descriptor {
			d := descriptorOf(blob, content)
			d.Annotations = map[string]string{"org.opencontainers.image.title": title}
			return d
		}()},
		Subject: &v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size},
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return name.Digest{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return name.Digest{}, err
	}
	ref := subject.Context().Digest(h.String())
	if err := remote.Put(ref, rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}, opts...); err != nil {
		return name.Digest{}, fmt.Errorf("push the artifact manifest: %w", err)
	}
	return ref, nil
}

func descriptorOf(l v1.Layer, content []byte) v1.Descriptor {
	mt, _ := l.MediaType()
	d, _ := l.Digest()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(content))}
}

type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// RemoteDigest is the digest the registry serves for ref (a HEAD: nothing
// is pulled), with docker's credentials.
func RemoteDigest(ref string, plainHTTP bool) (v1.Hash, error) {
	r, err := name.ParseReference(ref, nameOptions(plainHTTP)...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference: %w", err)
	}
	desc, err := remote.Head(r, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("the digest of %s: %w", r, err)
	}
	return desc.Digest, nil
}
