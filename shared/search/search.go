// Package search is the objects' search flow: what the index holds for one
// object key (a Document), how a change of the objects table becomes a
// versioned write of that document, how a search is asked for and checked
// against the table, and how the index is compared with the table. It
// imports no AWS package and no search engine's: the index is reached
// through Index, the table through Latest and Payloads, declared here and
// implemented by adapters (searchos for OpenSearch, objectsddb and
// objects.Store for the table).
//
// # One document per key, versioned
//
// The index holds one document per object key, at the key's latest
// version. Every write names an external version derived from the
// object's (ExternalVersion): 2·v for version v, 2·v+1 for the tombstone
// that deletes v. The objects store never restarts its numbering (a
// tombstone keeps the version it deleted, and the next write is v+1), so
// the external version rises through every put, delete and re-creation of
// a key, and the engine refuses whatever would move a document back: a
// replayed stream record, a retried batch, a reindex racing the stream.
//
// # Stale, never stale-wrong
//
// The index lags the table by the stream's delay. Every hit names the
// version it was indexed at, and a search asked Fresh reads the keys it
// found from the table in one batch and marks (or drops) the hits whose key
// was deleted or has moved on since.
package search

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/refusal"
)

// Errors, matched with errors.Is.
var (
	// ErrInvalid: a search request breaks an input rule. Matched by
	// *InvalidError, which carries the reason.
	ErrInvalid = errors.New("search: invalid")
	// ErrUnavailable: the index cannot be reached or refused the request
	// for load; the caller may retry.
	ErrUnavailable = errors.New("search: index unavailable")
	// ErrNoIndex: search is configured but no index exists yet (a stack
	// that turned search on over an existing table: run a reindex).
	ErrNoIndex = errors.New("search: no index")
	// ErrDisabled: the stack runs without search.
	ErrDisabled = errors.New("search: disabled")
)

// Reason says why a search request was refused; the values are stable (a
// 400 response carries them).
type Reason string

// Reasons.
const (
	ReasonBadQuery  Reason = "bad-query"
	ReasonBadLimit  Reason = "bad-limit"
	ReasonBadSize   Reason = "bad-size"
	ReasonBadTime   Reason = "bad-time"
	ReasonBadType   Reason = "bad-content-type"
	ReasonBadPrefix Reason = "bad-prefix"
	ReasonBadCursor Reason = "bad-cursor"
)

// Refused is ErrInvalid: errors.Is(err, ErrInvalid) holds for every
// *InvalidError.
func (Reason) Refused() error { return ErrInvalid }

// InvalidError is a refused search request: its reason and a detail that
// may be shown to the client.
type InvalidError = refusal.Error[Reason]

var invalid = refusal.New[Reason]

// TextState says what a document's Text holds.
type TextState string

// Text states.
const (
	TextIndexed     TextState = "indexed"     // the whole document, as text
	TextNone        TextState = "none"        // not a text-like content type
	TextTooLarge    TextState = "too-large"   // text-like, over the indexer's bound
	TextBinary      TextState = "binary"      // labelled text, holds binary (NUL bytes)
	TextUndecodable TextState = "undecodable" // labelled text, not valid UTF-8
	TextUnreadable  TextState = "unreadable"  // the payload could not be read (gone, checksum)
	TextRefused     TextState = "refused"     // the engine refused the text; indexed without it
	TextDeleted     TextState = "deleted"     // a tombstone has no text
)

// Document is what the index holds for one object key.
type Document struct {
	Key         string
	Version     int64 // the object's version (a tombstone: the version deleted)
	Deleted     bool  // a tombstone: the write deletes the key's document
	Size        int64
	ContentType string
	SHA256      string // hex
	Placement   string // inline, compressed, chunked, s3
	Modified    time.Time
	Text        string
	TextState   TextState
}

// ExternalVersion is the version the engine keeps for d: it rises through
// every put, delete and re-creation of a key (see the package comment).
func (d Document) ExternalVersion() int64 { return ExternalVersion(d.Version, d.Deleted) }

// ExternalVersion is 2·version for a live version, 2·version+1 for the
// tombstone of that version.
func ExternalVersion(version int64, deleted bool) int64 {
	v := 2 * version
	if deleted {
		v++
	}
	return v
}

// DocID is a key's document id: the SHA-256 of the key in hex. Object keys
// may be 1,024 bytes of any UTF-8, more than an id holds (512 bytes) and
// awkward in a URL path; the key itself is a field of the document.
func DocID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
