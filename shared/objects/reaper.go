package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// PayloadPrefixes are the prefixes the objects bucket holds payloads
// under: the store's blobs, and presigned uploads (a finalized upload's
// reference names its key). The reaper deletes, and the sweeper lists,
// nothing else.
var PayloadPrefixes = []string{BlobPrefix, UploadPrefix}

// ErrMalformed marks a removed item the reaper cannot read: it fails its
// batch (the stream's retries, bisection and on-failure destination then
// deal with it), never skipped silently.
var ErrMalformed = errors.New("objects: malformed record")

// ErrForeignBlob marks a reference to a blob outside the objects bucket's
// payload prefixes: the reaper never deletes it.
var ErrForeignBlob = errors.New("objects: blob outside the objects bucket's prefixes")

// Reaping is what the Reaper needs to free one payload; *Store satisfies it.
type Reaping interface {
	Reap(ctx context.Context, removed Record) error
}

var _ Reaping = (*Store)(nil)

// Removed is one item the table's stream reports removed, as the
// stream's adapter read it: a history item (Record), an item that frees
// nothing (Skip: v0, a chunk, an upload intent, an insert or a modify), or
// one it could not read (Err, which should wrap ErrMalformed).
type Removed struct {
	Record Record
	Skip   bool
	Err    error
}

// Reaper deletes the payloads of version items removed from the table.
//
// A version's payload lives as long as its history item vN (v0 is a copy
// always backed by vN). So the removal of a history item, a pruned version
// or a deleted object's, frees its blob or its chunks, which Store.Reap
// deletes. Every other item frees nothing. Deleting twice is harmless, so
// a retried batch, or an item reported twice, is fine.
type Reaper struct {
	Store Reaping
	// Bucket is the objects bucket; a reference to another bucket, or to a
	// key outside PayloadPrefixes, is refused (ErrForeignBlob).
	Bucket string
	// Parallelism bounds the items reaped at once (default 16).
	Parallelism int
}

// DefaultReapParallelism is Reaper.Parallelism's default.
const DefaultReapParallelism = 16

// ReapOutcome is what one removed item came to.
type ReapOutcome int

// Outcomes.
const (
	ReapSkipped ReapOutcome = iota // frees nothing
	ReapedBlob
	ReapedChunks
	ReapedNothing // a removed history item with an inline payload
	ReapFailed
)

// ReapResult is what one batch came to.
type ReapResult struct {
	Records  int
	Blobs    int   // blobs deleted (or already gone)
	Chunks   int   // chunk items deleted (or already gone)
	Bytes    int64 // stored bytes freed
	Skipped  int
	Failures int
	// Failed is the index in the batch of the first item that failed (-1
	// when none did); the stream resumes there. Err says why.
	Failed int
	Err    error
	Took   time.Duration
}

// Reap reaps a batch. Items are reaped in parallel (each is independent
// and idempotent); the first failed item in batch order is the one
// reported, and a retry from it reaps again what came after it, which is
// harmless.
func (r *Reaper) Reap(ctx context.Context, batch []Removed) ReapResult {
	start := time.Now()
	res := ReapResult{Records: len(batch), Failed: -1}
	type result struct {
		out ReapOutcome
		err error
	}
	results := make([]result, len(batch))
	n := r.Parallelism
	if n <= 0 {
		n = DefaultReapParallelism
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, rm := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := r.reapOne(ctx, rm)
			results[i] = result{out: out, err: err}
		})
	}
	wg.Wait()
	for i, x := range results {
		rec := batch[i].Record
		switch x.out {
		case ReapSkipped, ReapedNothing:
			res.Skipped++
		case ReapedBlob:
			res.Blobs++
			res.Bytes += rec.Blob.Size
		case ReapedChunks:
			res.Chunks += rec.Manifest.Count
			res.Bytes += rec.Manifest.Size
		case ReapFailed:
			res.Failures++
			if res.Err == nil { // the first in batch order
				res.Failed, res.Err = i, x.err
			}
		}
	}
	res.Took = time.Since(start)
	return res
}

// reapOne reaps one removed item.
func (r *Reaper) reapOne(ctx context.Context, rm Removed) (ReapOutcome, error) {
	if rm.Err != nil {
		return ReapFailed, rm.Err
	}
	if rm.Skip {
		return ReapSkipped, nil
	}
	removed := rm.Record
	out := ReapedNothing
	switch removed.Kind {
	case InS3:
		if removed.Blob == nil || removed.Blob.Key == "" {
			return ReapFailed, fmt.Errorf("%w: %s v%d is in S3 without a blob key", ErrMalformed, removed.Key, removed.Version)
		}
		if err := r.ours(*removed.Blob); err != nil {
			return ReapFailed, fmt.Errorf("%s v%d: %w", removed.Key, removed.Version, err)
		}
		out = ReapedBlob
	case Chunked:
		if removed.Manifest == nil {
			return ReapFailed, fmt.Errorf("%w: %s v%d is chunked without a manifest", ErrMalformed, removed.Key, removed.Version)
		}
		if err := removed.Manifest.Validate(); err != nil {
			return ReapFailed, fmt.Errorf("%w: %s v%d: %w", ErrMalformed, removed.Key, removed.Version, err)
		}
		out = ReapedChunks
	}
	if err := r.Store.Reap(ctx, removed); err != nil {
		return ReapFailed, err
	}
	return out, nil
}

// ours checks that a reference names a payload of the objects bucket.
func (r *Reaper) ours(ref BlobRef) error {
	if ref.Bucket != "" && r.Bucket != "" && ref.Bucket != r.Bucket {
		return fmt.Errorf("%w: s3://%s/%s", ErrForeignBlob, ref.Bucket, ref.Key)
	}
	for _, p := range PayloadPrefixes {
		if strings.HasPrefix(ref.Key, p) && len(ref.Key) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrForeignBlob, ref.Key)
}
