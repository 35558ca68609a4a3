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
	var r Report
	var refs, latest []ItemRef
	chunks := map[string]bool{}
	history := map[ItemKey]string{}    // history item → its write id
	sharedRefs := map[SharedRef]bool{} // by blob key, key and write id (Version zero)
	writes := map[[2]string]bool{}     // version items: key, write id
	err := table.Scan(ctx, func(e ItemRef) {
		r.Items++
		switch {
		case e.SharedRef != nil:
			sr := *e.SharedRef
			sr.Version = 0
			sharedRefs[sr] = true
		case e.Chunk != nil:
			r.Chunks++
			chunks[e.PK] = false
		case e.BlobKey != "" || e.Manifest != nil:
			refs = append(refs, e)
		}
		if v, err := ParseSortKey(e.SK); err == nil {
			r.Versions++
			if v == 0 {
				latest = append(latest, e)
			} else {
				history[ItemKey{PK: e.PK, SK: e.SK}] = e.WriteID
			}
			writes[[2]string{e.PK, e.WriteID}] = true
		}
	})
	if err != nil {
		return Report{}, fmt.Errorf("objects: check: %w", err)
	}
	live := map[string]bool{} // keys whose latest version is not a delete marker
	versions := map[string][]BlobVersion{}
	for _, prefix := range PayloadPrefixes {
		for page, err := range bucket.Versions(ctx, prefix) {
			if err != nil {
				return Report{}, fmt.Errorf("objects: check: %w", err)
			}
			for _, v := range page {
				versions[v.Key] = append(versions[v.Key], v)
				if v.Latest && !v.DeleteMarker {
					live[v.Key] = true
				}
			}
		}
	}
	r.Blobs = len(live)
	for _, e := range latest {
		if w, ok := history[ItemKey{PK: e.PK, SK: SortKey(e.Version)}]; !e.Deleted && (!ok || w != e.WriteID) {
			r.Dangling = append(r.Dangling, fmt.Sprintf("%s %s: version %d (write %s) has no history item", e.PK, e.SK, e.Version, e.WriteID))
		}
	}
	referenced := map[string]bool{}
	for _, e := range refs {
		isVersion := false
		if _, err := ParseSortKey(e.SK); err == nil && !e.Deleted {
			isVersion = true
			r.References++
		}
		if e.BlobKey != "" {
			referenced[e.BlobKey] = true
			if isVersion && !live[e.BlobKey] {
				r.Dangling = append(r.Dangling, fmt.Sprintf("%s %s: blob %s", e.PK, e.SK, e.BlobKey))
			}
			if isVersion && IsShared(e.BlobKey) && !sharedRefs[SharedRef{BlobKey: e.BlobKey, Key: e.PK, WriteID: e.WriteID}] {
				r.Dangling = append(r.Dangling, fmt.Sprintf("%s %s: shared blob %s without a reference record", e.PK, e.SK, e.BlobKey))
			}
			continue
		}
		m := *e.Manifest
		for _, k := range m.ChunkKeys(e.PK) {
			if _, ok := chunks[k.PK]; !ok {
				if isVersion {
					r.Dangling = append(r.Dangling, fmt.Sprintf("%s %s: chunk %s", e.PK, e.SK, k.PK))
				}
				continue
			}
			chunks[k.PK] = true
		}
	}
	for sr := range sharedRefs {
		referenced[sr.BlobKey] = true
		if !writes[[2]string{sr.Key, sr.WriteID}] {
			r.OrphanRefs = append(r.OrphanRefs, fmt.Sprintf("%s: %s write %s", sr.BlobKey, sr.Key, sr.WriteID))
		}
	}
	for k, vs := range versions {
		if !referenced[k] {
			r.OrphanBlobs = append(r.OrphanBlobs, vs...)
		}
	}
	for pk, named := range chunks {
		if !named {
			r.OrphanChunks = append(r.OrphanChunks, pk)
		}
	}
	slices.Sort(r.Dangling)
	slices.SortFunc(r.OrphanBlobs, func(a, b BlobVersion) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(r.OrphanChunks)
	slices.Sort(r.OrphanRefs)
	return r, nil
}
