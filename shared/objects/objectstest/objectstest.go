// Package objectstest has in-memory fakes of the stores the objects domain
// uses, with the real behaviour of the table and the bucket (conditions,
// transactions, the item size limit, If-None-Match, versions, checksums)
// and hooks to fail any call before or after it takes effect, so tests can
// crash a write at each step.
package objectstest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// Operation names passed to the hooks.
const (
	OpItem          = "Item"
	OpList          = "List"
	OpCommit        = "Commit"
	OpRemove        = "Remove"
	OpDeleteHistory = "DeleteHistory"
	OpPutChunks     = "PutChunks"
	OpGetChunks     = "GetChunks"
	OpDeleteChunks  = "DeleteChunks"
	OpPutBlob       = "PutBlob"
	OpGetBlob       = "GetBlob"
	OpDeleteBlob    = "DeleteBlob"
	OpPurgeBlob     = "PurgeBlob"
	OpCopyBlob      = "CopyBlob"
	OpBlobHead      = "BlobHead"
	OpReferenced    = "Referenced"
	OpDropRef       = "DropRef"
	OpMarkBlob      = "MarkBlob"
	OpUnmarkBlob    = "UnmarkBlob"
	OpForgetBlob    = "ForgetBlob"
	OpDropStaleRef  = "DropStaleRef"
	OpScan          = "Scan"
	OpVersions      = "Versions"
)

// Hooks fail calls. Before runs before an operation: an error it returns
// fails the call with no effect. After runs once the operation took effect:
// an error it returns is returned although the effect stays (a timeout
// after the server applied the write, a crash before the reply). Gate, if
// set, runs first, with the call's context: a test may hold the call there
// to order it against other callers' (see the interleaving tests).
type Hooks struct {
	Before func(op string) error
	After  func(op string) error
	Gate   func(ctx context.Context, op string) error
}

func (h *Hooks) gate(ctx context.Context, op string) error {
	if h.Gate != nil {
		if err := h.Gate(ctx, op); err != nil {
			return err
		}
	}
	return h.before(op)
}

func (h *Hooks) before(op string) error {
	if h.Before != nil {
		return h.Before(op)
	}
	return nil
}

func (h *Hooks) after(op string) error {
	if h.After != nil {
		return h.After(op)
	}
	return nil
}

// Table is the objects table in memory: version items and chunk items.
type Table struct {
	Hooks

	mu      sync.Mutex
	items   map[objects.ItemKey]objects.Record
	chunks  map[objects.ItemKey][]byte
	removed []objects.Record
	heads   map[string]head
	refs    map[objects.ItemKey]objects.SharedRef // blob key, RefSortKey

	chunksRead int
}

// head is a shared blob's head as the table keeps it.
type head struct {
	objects.BlobHead
	expires time.Time
}

var (
	_ objects.Items         = (*Table)(nil)
	_ objects.Chunks        = (*Table)(nil)
	_ objects.RefScanner    = (*Table)(nil)
	_ objects.SharedRecords = (*Table)(nil)
	_ objects.Blobs         = (*Bucket)(nil)
	_ objects.SweepBucket   = (*Bucket)(nil)
)

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{items: map[objects.ItemKey]objects.Record{}, chunks: map[objects.ItemKey][]byte{}, heads: map[string]head{}, refs: map[objects.ItemKey]objects.SharedRef{}}
}

func versionKey(key string, version int64) objects.ItemKey {
	return objects.ItemKey{PK: key, SK: objects.SortKey(version)}
}

func clone(r objects.Record) objects.Record {
	r.Data = bytes.Clone(r.Data)
	if r.Manifest != nil {
		m := *r.Manifest
		m.Sums = slices.Clone(m.Sums)
		r.Manifest = &m
	}
	if r.Blob != nil {
		b := *r.Blob
		r.Blob = &b
	}
	return r
}

// errValidation is what DynamoDB answers an item over its size limit with;
// nothing is written.
var errValidation = fmt.Errorf("objectstest: ValidationException: item size has exceeded the maximum allowed size: %w", objects.ErrNotApplied)

func checkItem(r objects.Record) error {
	if len(r.Data)+objects.ItemOverhead(r.Key, r.ContentType) > objects.MaxItemBytes {
		return errValidation
	}
	return nil
}

// Item implements objects.Items.
func (t *Table) Item(ctx context.Context, key string, version int64) (objects.Record, bool, error) {
	if err := t.gate(ctx, OpItem); err != nil {
		return objects.Record{}, false, err
	}
	t.mu.Lock()
	r, ok := t.items[versionKey(key, version)]
	t.mu.Unlock()
	return clone(r), ok, t.after(OpItem)
}

// List implements objects.Items.
func (t *Table) List(ctx context.Context, key string) (objects.Listing, error) {
	if err := t.gate(ctx, OpList); err != nil {
		return objects.Listing{}, err
	}
	t.mu.Lock()
	var l objects.Listing
	for k, r := range t.items {
		if k.PK != key {
			continue
		}
		r = clone(r).Meta()
		if k.SK == objects.LatestSortKey {
			l.Latest, l.Exists = r, true
		} else {
			l.History = append(l.History, r)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(l.History, func(a, b objects.Record) int { return cmp.Compare(a.Version, b.Version) })
	return l, t.after(OpList)
}

// conflict checks v0 against a base, as the condition expression would.
func (t *Table) conflict(key string, base objects.Base) *objects.ConflictError {
	cur, ok := t.items[versionKey(key, 0)]
	match := !ok && base.Version == 0 || ok && base.Version != 0 && cur.Version == base.Version && cur.Deleted == base.Deleted
	if match {
		return nil
	}
	return &objects.ConflictError{Key: key, Current: cur.Version, Deleted: cur.Deleted}
}

// Commit implements objects.Items: v0 and vN in one transaction.
func (t *Table) Commit(ctx context.Context, c objects.Commit) error {
	if err := t.gate(ctx, OpCommit); err != nil {
		return err
	}
	r := c.Record
	if r.Version != c.Base.Version+1 || r.Deleted {
		return fmt.Errorf("objectstest: commit of version %d on base %d: %w", r.Version, c.Base.Version, objects.ErrNotApplied)
	}
	if err := checkItem(r); err != nil {
		return err
	}
	t.mu.Lock()
	if ce := t.conflict(r.Key, c.Base); ce != nil {
		t.mu.Unlock()
		return ce
	}
	if _, ok := t.items[versionKey(r.Key, r.Version)]; ok { // vN's attribute_not_exists
		cur := t.items[versionKey(r.Key, 0)]
		t.mu.Unlock()
		return &objects.ConflictError{Key: r.Key, Current: cur.Version, Deleted: cur.Deleted}
	}
	if c := c.Claim; c != nil {
		if r.Blob == nil || r.Blob.Key != c.Head.Key && c.Head.Key != "" {
			t.mu.Unlock()
			return fmt.Errorf("objectstest: a claim on %s for blob %v: %w", c.Head.Key, r.Blob, objects.ErrNotApplied)
		}
		h := t.heads[r.Blob.Key]
		if h.Gen != c.Head.Gen || h.State == objects.BlobDeleting || c.Head.State != objects.BlobLive && h.State == objects.BlobLive {
			t.mu.Unlock()
			return fmt.Errorf("objectstest: head of %s at generation %d (%s), claimed %d: %w: %w", r.Blob.Key, h.Gen, h.State, c.Head.Gen, objects.ErrBlobChanged, objects.ErrNotApplied)
		}
		if h.State != objects.BlobLive {
			t.heads[r.Blob.Key] = head{BlobHead: objects.BlobHead{Key: r.Blob.Key, State: objects.BlobLive, Gen: h.Gen + 1}}
		}
		t.refs[objects.ItemKey{PK: r.Blob.Key, SK: objects.RefSortKey(r.Key, r.WriteID)}] = objects.SharedRef{BlobKey: r.Blob.Key, Key: r.Key, WriteID: r.WriteID, Version: r.Version}
	}
	t.items[versionKey(r.Key, 0)] = clone(r)
	t.items[versionKey(r.Key, r.Version)] = clone(r)
	t.mu.Unlock()
	return t.after(OpCommit)
}

// BlobHead implements objects.SharedRecords.
func (t *Table) BlobHead(ctx context.Context, blobKey string) (objects.BlobHead, error) {
	if err := t.gate(ctx, OpBlobHead); err != nil {
		return objects.BlobHead{}, err
	}
	t.mu.Lock()
	h, ok := t.heads[blobKey]
	t.mu.Unlock()
	if !ok {
		h.Key = blobKey
	}
	return h.BlobHead, t.after(OpBlobHead)
}

// Referenced implements objects.SharedRecords.
func (t *Table) Referenced(ctx context.Context, blobKey string) (bool, error) {
	if err := t.gate(ctx, OpReferenced); err != nil {
		return false, err
	}
	t.mu.Lock()
	found := false
	for k := range t.refs {
		found = found || k.PK == blobKey
	}
	t.mu.Unlock()
	return found, t.after(OpReferenced)
}

// DropRef implements objects.SharedRecords.
func (t *Table) DropRef(ctx context.Context, blobKey, key, writeID string) error {
	if err := t.gate(ctx, OpDropRef); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.refs, objects.ItemKey{PK: blobKey, SK: objects.RefSortKey(key, writeID)})
	t.mu.Unlock()
	return t.after(OpDropRef)
}

// DropStaleRef implements objects.SharedRecords.
func (t *Table) DropStaleRef(ctx context.Context, ref objects.SharedRef) (bool, error) {
	if err := t.gate(ctx, OpDropStaleRef); err != nil {
		return false, err
	}
	t.mu.Lock()
	dropped := false
	if r, ok := t.items[versionKey(ref.Key, ref.Version)]; !ok || r.WriteID != ref.WriteID {
		k := objects.ItemKey{PK: ref.BlobKey, SK: objects.RefSortKey(ref.Key, ref.WriteID)}
		_, dropped = t.refs[k]
		delete(t.refs, k)
	}
	t.mu.Unlock()
	return dropped, t.after(OpDropStaleRef)
}

// MarkBlob implements objects.SharedRecords.
func (t *Table) MarkBlob(ctx context.Context, blobKey, token string, now, staleBefore time.Time) (bool, error) {
	if err := t.gate(ctx, OpMarkBlob); err != nil {
		return false, err
	}
	t.mu.Lock()
	h := t.heads[blobKey]
	ok := h.State != objects.BlobDeleting || h.Since.Before(staleBefore)
	if ok {
		t.heads[blobKey] = head{BlobHead: objects.BlobHead{Key: blobKey, State: objects.BlobDeleting, Gen: h.Gen + 1, Token: token, Since: now}}
	}
	t.mu.Unlock()
	return ok, t.after(OpMarkBlob)
}

// UnmarkBlob implements objects.SharedRecords.
func (t *Table) UnmarkBlob(ctx context.Context, blobKey, token string) (bool, error) {
	return t.settleMark(ctx, OpUnmarkBlob, blobKey, token, objects.BlobLive, time.Time{})
}

// ForgetBlob implements objects.SharedRecords.
func (t *Table) ForgetBlob(ctx context.Context, blobKey, token string, expires time.Time) (bool, error) {
	return t.settleMark(ctx, OpForgetBlob, blobKey, token, objects.BlobGone, expires)
}

func (t *Table) settleMark(ctx context.Context, op, blobKey, token string, to objects.BlobState, expires time.Time) (bool, error) {
	if err := t.gate(ctx, op); err != nil {
		return false, err
	}
	t.mu.Lock()
	h, ok := t.heads[blobKey]
	ok = ok && h.State == objects.BlobDeleting && h.Token == token
	if ok {
		t.heads[blobKey] = head{BlobHead: objects.BlobHead{Key: blobKey, State: to, Gen: h.Gen + 1}, expires: expires}
	}
	t.mu.Unlock()
	return ok, t.after(op)
}

// Expire removes the gone heads whose time is before now, as the table's
// TTL does.
func (t *Table) Expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.heads {
		if h.State == objects.BlobGone && h.expires.Before(now) {
			delete(t.heads, k)
		}
	}
}

// Heads returns the shared blobs' heads, by blob key.
func (t *Table) Heads() map[string]objects.BlobHead {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]objects.BlobHead{}
	for k, h := range t.heads {
		out[k] = h.BlobHead
	}
	return out
}

// SharedRefs returns the shared blobs' reference records, sorted.
func (t *Table) SharedRefs() []objects.SharedRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Collect(maps.Values(t.refs))
	slices.SortFunc(out, func(a, b objects.SharedRef) int {
		return cmp.Or(cmp.Compare(a.BlobKey, b.BlobKey), cmp.Compare(a.Key, b.Key), cmp.Compare(a.WriteID, b.WriteID))
	})
	return out
}

// Remove implements objects.Items: a tombstone and history deletes in one
// transaction.
func (t *Table) Remove(ctx context.Context, rm objects.Removal) error {
	if err := t.gate(ctx, OpRemove); err != nil {
		return err
	}
	if len(rm.History) > objects.MaxRemoveHistory {
		return fmt.Errorf("objectstest: a removal of %d history items is over the transaction limit: %w", len(rm.History), objects.ErrNotApplied)
	}
	t.mu.Lock()
	if ce := t.conflict(rm.Key, rm.Base); ce != nil {
		t.mu.Unlock()
		return ce
	}
	tomb := clone(rm.Tombstone)
	tomb.Deleted = true
	t.items[versionKey(rm.Key, 0)] = tomb
	t.deleteHistory(rm.Key, rm.History)
	t.mu.Unlock()
	return t.after(OpRemove)
}

// DeleteHistory implements objects.Items.
func (t *Table) DeleteHistory(ctx context.Context, key string, versions []int64) error {
	if err := t.gate(ctx, OpDeleteHistory); err != nil {
		return err
	}
	if slices.Contains(versions, 0) {
		return fmt.Errorf("objectstest: DeleteHistory of v0: %w", objects.ErrNotApplied)
	}
	t.mu.Lock()
	t.deleteHistory(key, versions)
	t.mu.Unlock()
	return t.after(OpDeleteHistory)
}

func (t *Table) deleteHistory(key string, versions []int64) {
	for _, v := range versions {
		k := versionKey(key, v)
		if r, ok := t.items[k]; ok {
			delete(t.items, k)
			t.removed = append(t.removed, r)
		}
	}
}

// PutChunks implements objects.Chunks.
func (t *Table) PutChunks(ctx context.Context, key string, m objects.Manifest, chunks [][]byte) error {
	if err := t.gate(ctx, OpPutChunks); err != nil {
		return err
	}
	if len(chunks) != m.Count {
		return fmt.Errorf("objectstest: %d chunks for a manifest of %d", len(chunks), m.Count)
	}
	t.mu.Lock()
	for i, c := range chunks {
		k := m.ChunkKey(key, i)
		if len(c)+len(k.PK)+64 > objects.MaxItemBytes {
			t.mu.Unlock()
			return errValidation // BatchWriteItem: the batch before this one stays written
		}
		t.chunks[k] = bytes.Clone(c)
	}
	t.mu.Unlock()
	return t.after(OpPutChunks)
}

// GetChunks implements objects.Chunks.
func (t *Table) GetChunks(ctx context.Context, key string, m objects.Manifest) ([][]byte, error) {
	return t.GetChunkRange(ctx, key, m, 0, m.Count)
}

// GetChunkRange implements objects.Chunks. Its hooks see OpGetChunks, and
// ChunksRead counts the chunks it read.
func (t *Table) GetChunkRange(ctx context.Context, key string, m objects.Manifest, from, to int) ([][]byte, error) {
	if err := t.gate(ctx, OpGetChunks); err != nil {
		return nil, err
	}
	if from < 0 || to > m.Count || from > to {
		return nil, fmt.Errorf("objectstest: chunks [%d, %d) of a manifest of %d", from, to, m.Count)
	}
	t.mu.Lock()
	out := make([][]byte, 0, to-from)
	for i := from; i < to; i++ {
		k := m.ChunkKey(key, i)
		c, ok := t.chunks[k]
		if !ok {
			t.mu.Unlock()
			return nil, fmt.Errorf("objectstest: chunk %s: %w", k.PK, objects.ErrBlobNotFound)
		}
		t.chunksRead++
		out = append(out, bytes.Clone(c))
	}
	t.mu.Unlock()
	return out, t.after(OpGetChunks)
}

// ChunksRead is the number of chunk items read so far.
func (t *Table) ChunksRead() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.chunksRead
}

// DeleteChunks implements objects.Chunks.
func (t *Table) DeleteChunks(ctx context.Context, key string, m objects.Manifest) error {
	if err := t.gate(ctx, OpDeleteChunks); err != nil {
		return err
	}
	t.mu.Lock()
	for _, k := range m.ChunkKeys(key) {
		delete(t.chunks, k)
	}
	t.mu.Unlock()
	return t.after(OpDeleteChunks)
}

// Removed returns the history items deleted since the last call, as the
// table's stream would show their REMOVE records (old images): what the
// reaper gets.
func (t *Table) Removed() []objects.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.removed
	t.removed = nil
	return out
}

// Records returns every version item (v0 copies included), sorted by key
// and sort key.
func (t *Table) Records() []objects.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(t.items), func(a, b objects.ItemKey) int {
		return cmp.Or(cmp.Compare(a.PK, b.PK), cmp.Compare(a.SK, b.SK))
	})
	out := make([]objects.Record, len(keys))
	for i, k := range keys {
		out[i] = clone(t.items[k])
	}
	return out
}

// ChunkKeys returns the keys of the chunk items, sorted.
func (t *Table) ChunkKeys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.chunks {
		out = append(out, k.PK)
	}
	slices.Sort(out)
	return out
}

// Scan implements objects.RefScanner: every version item, chunk item and
// shared blob record, in key order, as objects.Check reads them.
func (t *Table) Scan(ctx context.Context, fn func(objects.ItemRef)) error {
	if err := t.gate(ctx, OpScan); err != nil {
		return err
	}
	t.mu.Lock()
	refs := make([]objects.ItemRef, 0, len(t.items)+len(t.chunks))
	for k, r := range t.items {
		r = clone(r)
		ref := objects.ItemRef{PK: k.PK, SK: k.SK, Version: r.Version, WriteID: r.WriteID, Deleted: r.Deleted, Manifest: r.Manifest}
		if r.Blob != nil {
			ref.BlobKey = r.Blob.Key
		}
		refs = append(refs, ref)
	}
	for k := range t.chunks {
		if c, ok := objects.ParseChunkKey(k.PK); ok {
			refs = append(refs, objects.ItemRef{PK: k.PK, SK: k.SK, Chunk: &c})
		}
	}
	for k, r := range t.refs {
		refs = append(refs, objects.ItemRef{PK: "blob#" + k.PK, SK: k.SK, SharedRef: &r})
	}
	for k, h := range t.heads {
		refs = append(refs, objects.ItemRef{PK: "blob#" + k, SK: "h", SharedHead: &h.BlobHead})
	}
	t.mu.Unlock()
	slices.SortFunc(refs, func(a, b objects.ItemRef) int { return cmp.Or(cmp.Compare(a.PK, b.PK), cmp.Compare(a.SK, b.SK)) })
	for _, ref := range refs {
		fn(ref)
	}
	return nil
}

// SetRecord writes a version item as is (to plant corrupt or odd state).
func (t *Table) SetRecord(sk string, r objects.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.items[objects.ItemKey{PK: r.Key, SK: sk}] = clone(r)
}

// CorruptChunk flips a bit of a chunk; false if there is no such chunk.
func (t *Table) CorruptChunk(k objects.ItemKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.chunks[k]
	if !ok || len(c) == 0 {
		return false
	}
	c[len(c)/2] ^= 1
	return true
}

// Bucket is a versioned bucket in memory.
type Bucket struct {
	Hooks
	Name string
	Now  func() time.Time // LastModified of new blobs (default time.Now)

	mu    sync.Mutex
	blobs map[string]stored
	seq   int
}

type stored struct {
	data        []byte
	versionID   string
	contentType string
	modified    time.Time
}

// NewBucket returns an empty bucket.
func NewBucket(name string) *Bucket { return &Bucket{Name: name, blobs: map[string]stored{}} }

// ErrBadDigest is the bucket's answer to a body that does not match the
// checksum sent with it; nothing is stored.
var ErrBadDigest = errors.New("objectstest: BadDigest")

// PutBlob implements objects.Blobs, with If-None-Match: * and the SHA-256
// checksum checked as S3 does.
func (b *Bucket) PutBlob(ctx context.Context, in objects.Blob) (objects.BlobRef, error) {
	if err := b.gate(ctx, OpPutBlob); err != nil {
		return objects.BlobRef{}, err
	}
	if objects.SumOf(in.Body) != in.SHA256 {
		return objects.BlobRef{}, fmt.Errorf("objectstest: put %s: %w", in.Key, ErrBadDigest)
	}
	b.mu.Lock()
	if _, ok := b.blobs[in.Key]; ok {
		b.mu.Unlock()
		return objects.BlobRef{}, fmt.Errorf("objectstest: put %s: %w", in.Key, objects.ErrBlobExists)
	}
	b.seq++
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	s := stored{data: bytes.Clone(in.Body), versionID: "ver" + strconv.Itoa(b.seq), contentType: in.ContentType, modified: now()}
	b.blobs[in.Key] = s
	b.mu.Unlock()
	ref := objects.BlobRef{Bucket: b.Name, Key: in.Key, VersionID: s.versionID, Size: int64(len(in.Body)), SHA256: in.SHA256, ContentType: in.ContentType, Codec: in.Codec}
	return ref, b.after(OpPutBlob)
}

// GetBlob implements objects.Blobs; the reader verifies size and SHA-256.
func (b *Bucket) GetBlob(ctx context.Context, ref objects.BlobRef) (io.ReadCloser, error) {
	if err := b.gate(ctx, OpGetBlob); err != nil {
		return nil, err
	}
	b.mu.Lock()
	s, ok := b.blobs[ref.Key]
	b.mu.Unlock()
	if !ok || ref.VersionID != "" && s.versionID != ref.VersionID {
		return nil, fmt.Errorf("objectstest: get %s: %w", ref.Key, objects.ErrBlobNotFound)
	}
	r := objects.VerifyReader("blob "+ref.Key, bytes.NewReader(bytes.Clone(s.data)), ref.Size, ref.SHA256)
	return io.NopCloser(r), b.after(OpGetBlob)
}

// PurgeBlob implements objects.Blobs.
func (b *Bucket) PurgeBlob(ctx context.Context, key string) error {
	if err := b.gate(ctx, OpPurgeBlob); err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.blobs, key)
	b.mu.Unlock()
	return b.after(OpPurgeBlob)
}

// CopyBlob implements objects.Blobs, with If-None-Match: *.
func (b *Bucket) CopyBlob(ctx context.Context, src objects.BlobRef, key string) error {
	if err := b.gate(ctx, OpCopyBlob); err != nil {
		return err
	}
	b.mu.Lock()
	s, ok := b.blobs[src.Key]
	_, exists := b.blobs[key]
	switch {
	case !ok || src.VersionID != "" && s.versionID != src.VersionID:
		b.mu.Unlock()
		return fmt.Errorf("objectstest: copy %s: %w", src.Key, objects.ErrBlobNotFound)
	case exists:
		b.mu.Unlock()
		return fmt.Errorf("objectstest: copy to %s: %w", key, objects.ErrBlobExists)
	}
	b.seq++
	b.blobs[key] = stored{data: bytes.Clone(s.data), versionID: "ver" + strconv.Itoa(b.seq), contentType: s.contentType, modified: b.now()}
	b.mu.Unlock()
	return b.after(OpCopyBlob)
}

func (b *Bucket) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// DeleteBlob implements objects.Blobs.
func (b *Bucket) DeleteBlob(ctx context.Context, ref objects.BlobRef) error {
	if err := b.gate(ctx, OpDeleteBlob); err != nil {
		return err
	}
	b.mu.Lock()
	if s, ok := b.blobs[ref.Key]; ok && (ref.VersionID == "" || s.versionID == ref.VersionID) {
		delete(b.blobs, ref.Key)
	}
	b.mu.Unlock()
	return b.after(OpDeleteBlob)
}

// List returns the blobs, sorted by key.
func (b *Bucket) List() []objects.BlobInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]objects.BlobInfo, 0, len(b.blobs))
	for k, s := range b.blobs {
		out = append(out, objects.BlobInfo{Key: k, Size: int64(len(s.data)), LastModified: s.modified})
	}
	slices.SortFunc(out, func(x, y objects.BlobInfo) int { return cmp.Compare(x.Key, y.Key) })
	return out
}

// Versions implements objects.VersionLister: the blobs under prefix, one
// version each (the latest), in one page.
func (b *Bucket) Versions(ctx context.Context, prefix string) iter.Seq2[[]objects.BlobVersion, error] {
	return func(yield func([]objects.BlobVersion, error) bool) {
		if err := b.gate(ctx, OpVersions); err != nil {
			yield(nil, err)
			return
		}
		var page []objects.BlobVersion
		b.mu.Lock()
		for k, s := range b.blobs {
			if strings.HasPrefix(k, prefix) {
				page = append(page, objects.BlobVersion{
					BlobInfo:  objects.BlobInfo{Key: k, Size: int64(len(s.data)), LastModified: s.modified},
					VersionID: s.versionID, Latest: true,
				})
			}
		}
		b.mu.Unlock()
		slices.SortFunc(page, func(x, y objects.BlobVersion) int { return cmp.Compare(x.Key, y.Key) })
		if len(page) > 0 {
			yield(page, nil)
		}
	}
}

// Delete implements objects.SweepBucket: it deletes the listed versions
// (a version already gone is no error).
func (b *Bucket) Delete(ctx context.Context, vs []objects.BlobVersion) ([]objects.BlobVersion, error) {
	if err := b.gate(ctx, OpDeleteBlob); err != nil {
		return nil, err
	}
	b.mu.Lock()
	for _, v := range vs {
		if s, ok := b.blobs[v.Key]; ok && s.versionID == v.VersionID {
			delete(b.blobs, v.Key)
		}
	}
	b.mu.Unlock()
	return vs, b.after(OpDeleteBlob)
}

// Has reports whether a blob exists.
func (b *Bucket) Has(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.blobs[key]
	return ok
}

// Corrupt flips a bit of a blob; false if there is no such blob.
func (b *Bucket) Corrupt(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.blobs[key]
	if !ok || len(s.data) == 0 {
		return false
	}
	s.data[len(s.data)/2] ^= 1
	return true
}
