package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// QuarantinePrefix is where records that can never be archived are kept,
// whole, with their reasons: outside every table= partition, so no reader
// (Athena's projection, DuckDB, the rotator's verification) ever reads them.
const QuarantinePrefix = "quarantine/"

// Quarantined is a stream record that fails deterministic validation (a
// poison record): its raw JSON as the event source delivered it and every
// reason it cannot be archived, in a stable order.
type Quarantined struct {
	Table          string // "" when the record names no table
	SequenceNumber string
	Record         []byte // the record's JSON, whole
	Reasons        []string
}

// Key is where q is kept: quarantine/table=<table>/<sequence>-<digest>.json.
// It is the same for the same record, so a retried batch rewrites it. The
// table and sequence are reduced to safe characters (a poison record may
// carry anything); the digest of the raw record keeps keys apart.
func (q Quarantined) Key() string {
	sum := sha256.Sum256(q.Record)
	return QuarantinePrefix + "table=" + safeSegment(q.Table, "unknown") + "/" +
		safeSegment(q.SequenceNumber, "nosequence") + "-" + hex.EncodeToString(sum[:8]) + ".json"
}

func safeSegment(s, empty string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 128 {
			break
		}
	}
	if out := strings.Trim(b.String(), "."); out != "" {
		return out
	}
	return empty
}

// QuarantineWriter keeps poison records (shared/archive/archives3
// implements it over S3). Writing the same record twice replaces it.
type QuarantineWriter interface {
	Quarantine(ctx context.Context, q Quarantined) error
}
