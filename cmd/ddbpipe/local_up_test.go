package main

import "testing"

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
