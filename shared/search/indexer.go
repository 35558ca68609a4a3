package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// Change is one change of an object key, read from the objects table's
// stream: the key's latest record after it (v0's new image; a tombstone
// when the key was deleted).
type Change struct {
	Record objects.Record
}

// Op is one write of a bulk request: index Doc, or delete its key's
// document, at the external version Version.
type Op struct {
	ID      string
	Version int64
	Delete  bool
	Doc     Document
}

// OpOf is the write that brings the index to d.
func OpOf(d Document) Op {
	return Op{ID: DocID(d.Key), Version: d.ExternalVersion(), Delete: d.Deleted, Doc: d}
}

// Outcome is the engine's answer to one Op.
type Outcome struct {
	Status int    // the item's HTTP status
	Type   string // the engine's error type, when it failed
	Reason string // the engine's error reason, when it failed
}

// Class is what an Outcome means to the indexer.
type Class int

// Classes of outcomes.
const (
	Done     Class = iota // written, or a delete of a document already gone
	Newer                 // refused: the index holds this version or a newer one
	Retry                 // refused for load or an engine fault: send it again
	Rejected              // refused for its content: it will never be taken as is
)

// Class classifies o. A 409 is a version conflict (OpenSearch's
// version_conflict_engine_exception): the index is at least as new, which
// is what the write wanted. 429 and 5xx are the engine's load and faults.
// Any other 4xx refuses the document itself (a mapping or a size limit).
func (o Outcome) Class(op Op) Class {
	switch {
	case o.Status >= 200 && o.Status < 300:
		return Done
	case o.Status == 404 && op.Delete:
		return Done
	case o.Status == 409:
		return Newer
	case o.Status == 429 || o.Status >= 500 || o.Status == 0:
		return Retry
	}
	return Rejected
}

// Index is the search engine, as the indexer and the reindex write to it.
type Index interface {
	// Bulk sends ops to the index (or alias) target in one request and
	// returns one Outcome per op, in order. An error means the request as
	// a whole failed (unreachable, refused for load, a malformed answer):
	// wrap ErrUnavailable when a retry may succeed.
	Bulk(ctx context.Context, target string, ops []Op) ([]Outcome, error)
}

// Payloads reads a version's document (objects.Store satisfies it).
type Payloads interface {
	Fetch(ctx context.Context, rec objects.Record, version int64) (objects.Object, error)
}

// Indexer keeps the index equal to the objects table, one batch of
// changes at a time.
type Indexer struct {
	Index    Index
	Payloads Payloads
	Target   string // the index or alias written to
	// MaxText is the largest text-like document whose text is indexed
	// (DefaultMaxText when 0).
	MaxText int
	// Backoff paces the retries of a failed bulk or of refused-for-load
	// items (100 ms to 5 s when zero). Retries go on until Reserve is
	// left of ctx's deadline (default 5 s), so the function answers in time.
	Backoff retry.Backoff
	Reserve time.Duration
	// Attempts bounds the bulk requests of a batch when ctx has no
	// deadline (default 10).
	Attempts int
	// MaxBulkBytes bounds a bulk request's body (default 5 MiB; OpenSearch
	// Service takes 10 MiB a request on its smallest instances): a batch
	// of large texts goes in several requests.
	MaxBulkBytes int
	// Fetches is how many payloads are read at once (default 8).
	Fetches int
	Log     *slog.Logger
}

// Refusal is a document the engine refused for its content, even without
// its text: it is left out of the index, with the engine's reason.
type Refusal struct {
	Key     string
	Version int64
	Reason  string
}

// Result is what one batch of changes came to.
type Result struct {
	Changes   int // changes read
	Documents int // documents written (indexed or deleted)
	Deletes   int // of which deletes
	Newer     int // writes the index refused as older than what it holds
	TextLess  int // documents indexed without text the engine refused
	Refused   []Refusal
	Requests  int // bulk requests sent (1 unless items were retried)
	Took      time.Duration
	Err       error // the batch is not done: retry it whole
}

// withDefaults is a copy of ix with its zero settings at their defaults:
// Apply may run from several goroutines at once (a reindex's writers).
func (ix Indexer) withDefaults() *Indexer {
	if ix.MaxText <= 0 {
		ix.MaxText = DefaultMaxText
	}
	if ix.Backoff.Base <= 0 {
		ix.Backoff = retry.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	}
	if ix.Reserve <= 0 {
		ix.Reserve = 5 * time.Second
	}
	if ix.Attempts <= 0 {
		ix.Attempts = 10
	}
	if ix.MaxBulkBytes <= 0 {
		ix.MaxBulkBytes = 5 << 20
	}
	if ix.Fetches <= 0 {
		ix.Fetches = 8
	}
	if ix.Log == nil {
		ix.Log = slog.Default()
	}
	return &ix
}

// Coalesce keeps one change per key, the newest (the highest external
// version; the later one on a tie), in the order keys first appear.
func Coalesce(changes []Change) []Change {
	at := make(map[string]int, len(changes))
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		i, seen := at[c.Record.Key]
		if !seen {
			at[c.Record.Key] = len(out)
			out = append(out, c)
			continue
		}
		if versionOf(c) >= versionOf(out[i]) {
			out[i] = c
		}
	}
	return out
}

func versionOf(c Change) int64 { return ExternalVersion(c.Record.Version, c.Record.Deleted) }

// Apply writes a batch of changes: coalesced per key, their documents
// built (texts read in parallel), then one bulk request. Items refused for
// load are sent again with backoff; a document refused for its content is
// sent again without its text, and left out (Refused) if it is refused
// even so. Result.Err is set when the batch must be retried whole: a
// payload that could not be read for a passing reason, or the engine
// unreachable until the deadline's reserve.
func (ix *Indexer) Apply(ctx context.Context, changes []Change) Result {
	ix = ix.withDefaults()
	began := time.Now()
	res := Result{Changes: len(changes)}
	latest := Coalesce(changes)
	docs, err := ix.documents(ctx, latest)
	if err != nil {
		res.Err = err
		res.Took = time.Since(began)
		return res
	}
	ops := make([]Op, len(docs))
	for i, d := range docs {
		ops[i] = OpOf(d)
	}
	res.Err = ix.write(ctx, ops, &res)
	res.Took = time.Since(began)
	return res
}

// documents builds the document of each change, reading the texts of
// text-like documents Fetches at a time.
func (ix *Indexer) documents(ctx context.Context, changes []Change) ([]Document, error) {
	docs := make([]Document, len(changes))
	errs := make([]error, len(changes))
	sem := make(chan struct{}, ix.Fetches)
	var wg sync.WaitGroup
	for i, c := range changes {
		docs[i] = DocumentOf(c.Record)
		if docs[i].TextState != "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			docs[i].Text, docs[i].TextState, errs[i] = ix.text(ctx, c.Record)
		}()
	}
	wg.Wait()
	return docs, errors.Join(errs...)
}

// DocumentOf is a record's document without its text: the text state is
// set when the record has no text to read (a tombstone, a type that is not
// text-like, a document over the bound), and "" when it has.
func DocumentOf(r objects.Record) Document {
	d := Document{
		Key: r.Key, Version: r.Version, Deleted: r.Deleted, Size: r.Size,
		ContentType: r.ContentType, Placement: string(r.Kind), Modified: r.CreatedAt,
	}
	if !r.SHA256.IsZero() {
		d.SHA256 = r.SHA256.String()
	}
	switch {
	case r.Deleted:
		d.TextState = TextDeleted
	case !TextLike(r.ContentType):
		d.TextState = TextNone
	}
	return d
}

// text reads a text-like record's document. A payload gone since the
// change (a newer write or a delete follows it on the stream) or failing
// its checksum is indexed without text. Any other failure (throttling, a
// store down for a moment) is read again with backoff, as a refused bulk
// is sent again, until the deadline's reserve: then it is the batch's,
// which Lambda retries whole.
func (ix *Indexer) text(ctx context.Context, r objects.Record) (string, TextState, error) {
	if r.Size > int64(ix.MaxText) {
		return "", TextTooLarge, nil
	}
	for attempt := 1; ; attempt++ {
		obj, err := ix.Payloads.Fetch(ctx, r, r.Version)
		switch {
		case errors.Is(err, objects.ErrNotFound), errors.Is(err, objects.ErrChecksum), errors.Is(err, objects.ErrDangling):
			ix.Log.WarnContext(ctx, "document indexed without its text: its payload cannot be read", "key", r.Key, "version", r.Version, "err", err)
			return "", TextUnreadable, nil
		case err == nil:
			text, state := Text(obj.Body, ix.MaxText)
			return text, state, nil
		}
		if perr := ix.pause(ctx, attempt); perr != nil {
			return "", "", fmt.Errorf("search: read %q v%d for its text (%d attempts): %w", r.Key, r.Version, attempt, errors.Join(err, perr))
		}
	}
}

// write sends ops, then again those refused for load (with backoff) and
// those refused for their content (without their text), until every op is
// settled or the deadline's reserve is reached.
func (ix *Indexer) write(ctx context.Context, ops []Op, res *Result) error {
	for attempt := 1; len(ops) > 0; attempt++ {
		if attempt > 1 {
			if err := ix.pause(ctx, attempt-1); err != nil {
				return fmt.Errorf("search: %d documents not written: %w", len(ops), err)
			}
		}
		var again []Op
		for _, part := range ix.parts(ops) {
			res.Requests++
			outcomes, err := ix.Index.Bulk(ctx, ix.Target, part)
			if err != nil {
				ix.Log.WarnContext(ctx, "bulk request failed; retrying", "docs", len(part), "attempt", attempt, "err", err)
				again = append(again, part...)
				continue
			}
			again = append(again, ix.settle(ctx, part, outcomes, res)...)
		}
		ops = again
	}
	return nil
}

// opOverhead is about what an op adds to a bulk request besides its text:
// the action line and the document's other fields.
const opOverhead = 1 << 10

// parts splits ops into bulk requests of at most MaxBulkBytes each (one
// request, unless the batch's texts are large).
func (ix *Indexer) parts(ops []Op) [][]Op {
	var out [][]Op
	start, size := 0, 0
	for i, op := range ops {
		n := opOverhead + 2*len(op.Doc.Text) // the text twice: the field and its excerpt's share, escaped
		if i > start && size+n > ix.MaxBulkBytes {
			out = append(out, ops[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(out, ops[start:])
}

// settle counts the ops the engine settled and returns those to send again.
func (ix *Indexer) settle(ctx context.Context, ops []Op, outcomes []Outcome, res *Result) []Op {
	var again []Op
	for i, op := range ops {
		o := outcomes[i]
		switch o.Class(op) {
		case Done:
			res.Documents++
			if op.Delete {
				res.Deletes++
			}
		case Newer:
			res.Newer++
		case Retry:
			again = append(again, op)
		case Rejected:
			if op.Delete || op.Doc.TextState == TextRefused {
				ix.Log.ErrorContext(ctx, "document refused by the index; left out", "key", op.Doc.Key, "version", op.Doc.Version, "type", o.Type, "reason", o.Reason)
				res.Refused = append(res.Refused, Refusal{Key: op.Doc.Key, Version: op.Doc.Version, Reason: o.Type + ": " + o.Reason})
				continue
			}
			ix.Log.WarnContext(ctx, "document refused by the index; sent again without its text", "key", op.Doc.Key, "version", op.Doc.Version, "type", o.Type, "reason", o.Reason)
			res.TextLess++
			op.Doc.Text, op.Doc.TextState = "", TextRefused
			again = append(again, op)
		}
	}
	return again
}

// pause waits before retry n, or fails when that would eat into the
// deadline's reserve.
func (ix *Indexer) pause(ctx context.Context, n int) error {
	d := ix.Backoff.Delay(n)
	deadline, ok := ctx.Deadline()
	switch {
	case ok && time.Until(deadline)-d < ix.Reserve:
		return fmt.Errorf("%w: out of time for retries", ErrUnavailable)
	case !ok && n >= ix.Attempts:
		return fmt.Errorf("%w: %d attempts", ErrUnavailable, n)
	}
	return retry.Sleep(ctx, d)
}
