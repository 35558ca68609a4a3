// Package objectsddb is the objects domain's one DynamoDB adapter, for the
// objects table and every item kind it holds: the version items of each
// object (objects.Items) and the chunk items of chunked payloads
// (objects.Chunks), both kept by Store; the presigned uploads' intents
// (objects.Uploads), kept by Uploads; and the references the orphan
// sweeper and objects.Check read (objects.SweepTable), by Refs. Each type
// declares the few client calls it makes, so each function's policy can
// grant just those. Blobs live in S3 (package objectss3).
//
// # Items
//
// The keys are the domain's (see package objects): pk is the object key and
// sk "v0" (the latest version, a copy) or "v" and ten digits (history); a
// chunk has pk <key>#<writeID>#<i> and sk "c". A key may hold '#' and look
// like a chunk's pk: the sort key says which item is which, and a chunk's
// pk is read from the right (objects.ParseChunkKey). Version items carry:
//
//	version      N  the version (a tombstone keeps the one deleted)
//	kind         S  inline | compressed | chunked | s3
//	size         N  of the document
//	sha256       S  of the document, hex
//	contentType  S
//	codec        S  identity | gzip (of data, or of the chunks)
//	data         B  inline kinds: the stored bytes
//	manifest     M  chunked: count, chunkSize, size, sha256 (of the stored
//	                bytes), and sums (B: each chunk's SHA-256, 32 bytes each, in
//	                order; absent on manifests written without them)
//	blob         M  s3: bucket, key, versionId, size, sha256 (of the stored
//	                bytes); contentType and codec only where they differ from
//	                the record's
//	writeId      S  the Put that wrote the version (names its chunks or blob)
//	createdAt    S  RFC 3339, UTC
//	deleted      BOOL  true on a tombstone (v0 of a deleted object)
//
// Empty values are left out. A chunk item holds only its key and data (B).
//
// # What "not applied" means here
//
// The domain deletes a staged payload only after a commit that certainly
// wrote nothing (objects.ErrNotApplied). A transaction certainly wrote
// nothing when DynamoDB cancelled it (a condition failed: a
// *objects.ConflictError; other transactions or throttling held it up:
// objects.ErrNotApplied, after a few retries of our own), or when DynamoDB
// refused every attempt the SDK made (validation, throttling, a missing
// table). Each transaction carries a client request token, so the SDK's
// retry of an attempt that was applied but whose reply was lost returns
// success rather than a condition failure. An attempt that failed without
// a clear refusal (a 5xx, a dropped connection, a timeout) makes the
// outcome unknown, and the error does not wrap ErrNotApplied.
//
// # Reads and batches
//
// Every read is strongly consistent: v0 decides what a write is based on,
// and a chunk is read moments after it was written. Chunks are written,
// read and deleted with BatchWriteItem and BatchGetItem in parallel
// batches; unprocessed items are retried with backoff, a bounded number of
// times. History deletes (pruning, the rest of a long delete) are batch
// deletes too: they need no atomicity, and outside a transaction they bill
// half the write units. The reaper reads removed history items from the
// table's stream with HistoryRecord.
package objectsddb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client
// satisfies it, and so do the tests' wrappers that count its queries or
// leave part of a batch unprocessed, which DynamoDB Local never does. The
// package's other readers and writers take the client itself.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var (
	_ API = (*dynamodb.Client)(nil)

	_ objects.Items  = (*Store)(nil)
	_ objects.Chunks = (*Store)(nil)
)

// ErrTransactionConflict: DynamoDB kept cancelling a transaction because
// other transactions held its items. Nothing was written; it wraps
// objects.ErrNotApplied.
var ErrTransactionConflict = errors.New("objectsddb: transaction conflict")

// Store is the objects table.
type Store struct {
	db    API
	table string

	// Parallelism bounds the concurrent batch requests of one chunk
	// read, write or delete, and of one history delete (default 8).
	Parallelism int
	// MaxBatchAttempts bounds the requests of one batch whose items
	// DynamoDB leaves unprocessed (default 8); then the call fails with
	// objects.ErrThrottled.
	MaxBatchAttempts int
	// MaxTxAttempts bounds the transactions of one commit or removal that
	// DynamoDB cancels for a concurrent transaction or throttling
	// (default 4).
	MaxTxAttempts int
	// Backoff is the pause before retry n (1, 2, …) of unprocessed batch
	// items or a cancelled transaction (default DefaultBackoff).
	Backoff retry.Backoff
	// NewToken returns a transaction's client request token: unique, at
	// most 36 characters (default 128 random bits, hex).
	NewToken func() string
	// IndexShards is N, the listing index's write shards (default
	// objects.DefaultIndexShards). It may grow, never shrink: a listing
	// queries shards 0 to N-1, where every key written with a smaller N is.
	IndexShards int
}

// Defaults.
const (
	DefaultParallelism      = 8
	DefaultMaxBatchAttempts = 8
	DefaultMaxTxAttempts    = 4
)

// New returns a store over the table.
func New(db API, table string) *Store {
	return &Store{
		db: db, table: table,
		Parallelism: DefaultParallelism, MaxBatchAttempts: DefaultMaxBatchAttempts, MaxTxAttempts: DefaultMaxTxAttempts,
		Backoff: DefaultBackoff, NewToken: randomToken, IndexShards: objects.DefaultIndexShards,
	}
}

// DefaultBackoff is Store.Backoff's default: 20 ms doubling up to 1 s,
// each pause drawn from the upper half of its step.
var DefaultBackoff = retry.Backoff{Base: 20 * time.Millisecond, Max: time.Second}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (s *Store) parallelism() int      { return max(s.Parallelism, 1) }
func (s *Store) maxBatchAttempts() int { return max(s.MaxBatchAttempts, 1) }
func (s *Store) maxTxAttempts() int    { return max(s.MaxTxAttempts, 1) }

// pause sleeps before retry n, or returns the context's error.
func (s *Store) pause(ctx context.Context, n int) error { return s.Backoff.Wait(ctx, n) }

// refusedCodes are answers to a request that DynamoDB rejected before
// applying anything: a malformed or oversized request, a missing table, no
// permission, throttling.
var refusedCodes = append([]string{
	"ValidationException", "ResourceNotFoundException", "AccessDeniedException",
	"UnrecognizedClientException", "SerializationException", "ItemCollectionSizeLimitExceededException",
}, awserr.DynamoDBThrottle...)

// classify wraps throttling with objects.ErrThrottled. For requests that
// may have been partly applied (batches) or that write nothing (reads).
func classify(err error) error {
	if awserr.IsDynamoDBThrottle(err) {
		return fmt.Errorf("%w: %w", objects.ErrThrottled, err)
	}
	return err
}

// attempts records the outcome of each attempt the SDK makes of one
// operation (its retries included).
type attempts struct{ errs []error }

// observe is a per-operation option that records every attempt's error,
// from just after the SDK's retry middleware.
func (a *attempts) observe(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		m := middleware.FinalizeMiddlewareFunc("objectsddb.attempts", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			a.errs = append(a.errs, err)
			return out, md, err
		})
		if err := st.Finalize.Insert(m, "Retry", middleware.After); err != nil {
			return st.Finalize.Add(m, middleware.After) // no retry middleware: one attempt
		}
		return nil
	})
}

// refused reports whether every attempt of a failed operation (the last
// one's error is err) was refused before anything was applied. With no
// attempts recorded (a client that does not run the middleware), err
// alone decides.
func (a *attempts) refused(err error) bool {
	errs := a.errs
	if len(errs) == 0 {
		errs = []error{err}
	}
	for _, e := range errs {
		if e != nil && !awserr.Is(e, refusedCodes...) {
			return false
		}
	}
	return true
}
