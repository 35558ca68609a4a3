package main

import (
	"io"
	"strings"
	"testing"
)

// local up says how its DynamoDB behaves, whatever the flags.
func TestLocalUpEchoesDynamoDB(t *testing.T) {
	for _, tt := range []struct {
		u    upFlags
		want string
	}{
		{upFlags{streamShards: 1}, "streams of 1 shard (-stream-shards); no transaction conflicts (-conflicts)"},
		{upFlags{streamShards: 4, splitAfter: 500, conflicts: true}, "streams of 4 shards, each split in two after 500 records; overlapping transactions cancelled (TransactionConflict)"},
		{upFlags{streamShards: 8, keyLimit: 1000, tableScale: 0.5}, "streams of 8 shards, never split (-stream-split-after); no transaction conflicts (-conflicts); 1000 writes/s per partition key; table writes at 0.5 of on-demand's"},
	} {
		if got := tt.u.dynamoDB(); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.u, got, tt.want)
		}
	}
}

// -stack-name takes what the stack's bucket names can start with, and
// says what it wants otherwise.
func TestStackNameFlagRejects(t *testing.T) {
	for _, name := range []string{"", "Demo", "1demo", "-demo", "de_mo", "de.mo", "demo-1234567890ab", "démo", "demo\n"} {
		u := upFlags{stackName: name, streamShards: 1}
		_, logf, err := u.options(io.Discard)
		if logf != nil {
			logf.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "-stack-name") {
			t.Errorf("-stack-name %q: %v, want it refused", name, err)
		}
	}
	for _, name := range []string{"ddbpipe", "demo-123456", "a", "a234567890123456"} {
		if !stackNamePattern.MatchString(name) {
			t.Errorf("-stack-name %q refused", name)
		}
	}
}
