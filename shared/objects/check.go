package objects

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Report is the state of the store's invariants, as Check found it.
type Report struct {
	Items      int // table items
	Versions   int // version items (v0 included)
	Blobs      int // live blob keys under PayloadPrefixes
	Chunks     int // chunk items
	References int // version items naming a blob or chunks
	// Dangling lists the references whose payload is missing ("<key> <sk>:
	// blob <blob key>" or "… chunk <pk>"), and the latest versions (v0)
	// that no history item backs ("<key> v0: version N (write W) has no
	// history item"): the invariants that must never break.
	Dangling []string
	// OrphanBlobs are versions under PayloadPrefixes that no item names, and
	// OrphanChunks chunk items that no manifest names, whatever their age:
	// right after a sweep with every payload past its grace, both are empty.
	OrphanBlobs  []BlobVersion
	OrphanChunks []string
	// OrphanRefs are reference records of shared blobs whose version item
	// is gone ("<blob key>: <key> write <W>"); the reaper drops them, and
	// the sweeper those it missed. A live version naming a shared blob
	// without its reference record is in Dangling: nothing would stop a
	// deleter.
	OrphanRefs []string
}

// Err is nil when no reference dangles and there is no orphan; otherwise
// it says what is wrong (the first few of each).
func (r Report) Err() error {
	var errs []error
	if err := r.DanglingErr(); err != nil {
		errs = append(errs, err)
	}
	if len(r.OrphanBlobs) > 0 {
		keys := make([]string, 0, min(len(r.OrphanBlobs), 5))
		for _, v := range r.OrphanBlobs[:min(len(r.OrphanBlobs), 5)] {
			keys = append(keys, v.Key)
		}
		errs = append(errs, fmt.Errorf("%d orphan blob versions: %s", len(r.OrphanBlobs), strings.Join(keys, ", ")))
	}
	if len(r.OrphanChunks) > 0 {
		errs = append(errs, fmt.Errorf("%d orphan chunks: %s", len(r.OrphanChunks), strings.Join(r.OrphanChunks[:min(len(r.OrphanChunks), 5)], ", ")))
	}
	if len(r.OrphanRefs) > 0 {
		errs = append(errs, fmt.Errorf("%d stale reference records: %s", len(r.OrphanRefs), strings.Join(r.OrphanRefs[:min(len(r.OrphanRefs), 5)], ", ")))
	}
	return errors.Join(errs...)
}

// DanglingErr is nil when every reference's payload exists: the invariant
// that holds at every moment, while Err's also wants no orphan.
func (r Report) DanglingErr() error {
	if len(r.Dangling) == 0 {
		return nil
	}
	return fmt.Errorf("%d dangling references: %s", len(r.Dangling), strings.Join(r.Dangling[:min(len(r.Dangling), 5)], "; "))
}

// Check reads the whole table and the bucket's payload prefixes and
// reports dangling references and orphans. It is for tests and operators
// of a quiet store: writes running meanwhile show up as orphans (a blob
// whose commit is on its way), and deletes as dangling references (an
// item read before its removal, whose payload the reaper deleted before
// the listing).
func Check(ctx context.Context, table RefScanner, bucket VersionLister) (Report, error) {
	c := checkState{
		chunks:     map[string]bool{},
		history:    map[ItemKey]string{},
		sharedRefs: map[SharedRef]bool{},
		writes:     map[[2]string]bool{},
		live:       map[string]bool{},
		versions:   map[string][]BlobVersion{},
		referenced: map[string]bool{},
	}
	if err := table.Scan(ctx, c.addItem); err != nil {
		return Report{}, fmt.Errorf("objects: check: %w", err)
	}
	if err := c.list(ctx, bucket); err != nil {
		return Report{}, fmt.Errorf("objects: check: %w", err)
	}
	c.r.Blobs = len(c.live)
	c.checkHistory()
	c.checkReferences()
	c.findOrphans()
	r := c.r
	slices.Sort(r.Dangling)
	slices.SortFunc(r.OrphanBlobs, func(a, b BlobVersion) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(r.OrphanChunks)
	slices.Sort(r.OrphanRefs)
	return r, nil
}

// checkState is what Check has read of the table and the bucket, and the
// report it builds from them.
type checkState struct {
	r            Report
	refs, latest []ItemRef
	chunks       map[string]bool    // chunk item → named by a manifest
	history      map[ItemKey]string // history item → its write id
	sharedRefs   map[SharedRef]bool // by blob key, key and write id (Version zero)
	writes       map[[2]string]bool // version items: key, write id
	live         map[string]bool    // keys whose latest version is not a delete marker
	versions     map[string][]BlobVersion
	referenced   map[string]bool // blob keys some item or reference record names
}

// addItem sorts one item of the table's scan.
func (c *checkState) addItem(e ItemRef) {
	c.r.Items++
	switch {
	case e.SharedRef != nil:
		sr := *e.SharedRef
		sr.Version = 0
		c.sharedRefs[sr] = true
	case e.Chunk != nil:
		c.r.Chunks++
		c.chunks[e.PK] = false
	case e.BlobKey != "" || e.Manifest != nil:
		c.refs = append(c.refs, e)
	}
	if v, err := ParseSortKey(e.SK); err == nil {
		c.r.Versions++
		if v == 0 {
			c.latest = append(c.latest, e)
		} else {
			c.history[ItemKey{PK: e.PK, SK: e.SK}] = e.WriteID
		}
		c.writes[[2]string{e.PK, e.WriteID}] = true
	}
}

// list reads every version under the bucket's payload prefixes.
func (c *checkState) list(ctx context.Context, bucket VersionLister) error {
	for _, prefix := range PayloadPrefixes {
		for page, err := range bucket.Versions(ctx, prefix) {
			if err != nil {
				return err
			}
			for _, v := range page {
				c.versions[v.Key] = append(c.versions[v.Key], v)
				if v.Latest && !v.DeleteMarker {
					c.live[v.Key] = true
				}
			}
		}
	}
	return nil
}

// checkHistory reports a latest version whose history item is missing or
// of another write.
func (c *checkState) checkHistory() {
	for _, e := range c.latest {
		if w, ok := c.history[ItemKey{PK: e.PK, SK: SortKey(e.Version)}]; !e.Deleted && (!ok || w != e.WriteID) {
			c.r.Dangling = append(c.r.Dangling, fmt.Sprintf("%s %s: version %d (write %s) has no history item", e.PK, e.SK, e.Version, e.WriteID))
		}
	}
}

// checkReferences reports a version naming a missing blob, chunk or
// reference record, and notes every blob and chunk that is named.
func (c *checkState) checkReferences() {
	for _, e := range c.refs {
		isVersion := false
		if _, err := ParseSortKey(e.SK); err == nil && !e.Deleted {
			isVersion = true
			c.r.References++
		}
		if e.BlobKey != "" {
			c.referenced[e.BlobKey] = true
			if isVersion && !c.live[e.BlobKey] {
				c.r.Dangling = append(c.r.Dangling, fmt.Sprintf("%s %s: blob %s", e.PK, e.SK, e.BlobKey))
			}
			if isVersion && IsShared(e.BlobKey) && !c.sharedRefs[SharedRef{BlobKey: e.BlobKey, Key: e.PK, WriteID: e.WriteID}] {
				c.r.Dangling = append(c.r.Dangling, fmt.Sprintf("%s %s: shared blob %s without a reference record", e.PK, e.SK, e.BlobKey))
			}
			continue
		}
		m := *e.Manifest
		for _, k := range m.ChunkKeys(e.PK) {
			if _, ok := c.chunks[k.PK]; !ok {
				if isVersion {
					c.r.Dangling = append(c.r.Dangling, fmt.Sprintf("%s %s: chunk %s", e.PK, e.SK, k.PK))
				}
				continue
			}
			c.chunks[k.PK] = true
		}
	}
}

// findOrphans reports reference records of no version item, and the blobs
// and chunks nothing names.
func (c *checkState) findOrphans() {
	for sr := range c.sharedRefs {
		c.referenced[sr.BlobKey] = true
		if !c.writes[[2]string{sr.Key, sr.WriteID}] {
			c.r.OrphanRefs = append(c.r.OrphanRefs, fmt.Sprintf("%s: %s write %s", sr.BlobKey, sr.Key, sr.WriteID))
		}
	}
	for k, vs := range c.versions {
		if !c.referenced[k] {
			c.r.OrphanBlobs = append(c.r.OrphanBlobs, vs...)
		}
	}
	for pk, named := range c.chunks {
		if !named {
			c.r.OrphanChunks = append(c.r.OrphanChunks, pk)
		}
	}
}
