package main

import (
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
)

// A download's progress into a log (not a terminal) is plain lines, the
// first and the last at least, with no carriage return.
func TestDownloadProgressInALog(t *testing.T) {
	var log strings.Builder
	show := progressTo(&log)
	for done := 0; done <= 50; done++ {
		show(archiveduckdb.SyncProgress{Done: done, Total: 50, Bytes: int64(done) << 20, TotalBytes: 50 << 20})
	}
	got := log.String()
	if strings.Contains(got, "\r") {
		t.Errorf("carriage returns in a log: %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "downloading 0/50 files") || !strings.Contains(lines[1], "downloading 50/50 files, 50.0 MiB of 50.0 MiB") {
		t.Errorf("progress in a log:\n%s\nwant the first and the last line only (a line every 5 s)", got)
	}
}
