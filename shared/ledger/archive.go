package ledger

import (
	"encoding/json"
	"fmt"
	"time"
)

// ArchivePrefix is where the archive keeps month m of a table, a Hive-style
// partition: table=<table>/month=<m>/. A ledger's archive table is its
// prefix (<stack>-votes).
func ArchivePrefix(table, m string) string { return "table=" + table + "/month=" + m + "/" }

// ManifestKey is the partition's manifest. The leading underscore keeps
// Athena from reading it as data. The rotator writes a ledger month's
// manifest with a verification that passed only once the month is
// verified archived, on its way to deleting the table: it is the record
// of the month's retirement, which both the rotator (never create the
// month again) and the counter (reject its votes month-closed) read.
func ManifestKey(table, m string) string { return ArchivePrefix(table, m) + "_manifest.json" }

// Retired reads a manifest's record of retirement: whether its
// verification passed, and when it ran.
func Retired(manifest []byte) (at time.Time, retired bool, err error) {
	var m struct {
		Verification *struct {
			At time.Time `json:"at"`
			OK bool      `json:"ok"`
		} `json:"verification"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: read a manifest: %w", err)
	}
	if m.Verification == nil || !m.Verification.OK {
		return time.Time{}, false, nil
	}
	return m.Verification.At, true, nil
}
