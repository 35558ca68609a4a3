package objectslambda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// Two updaters of one key, each round both based on the same version with
// If-Match: exactly one wins, the other gets a conflict naming the winner's
// version, and the history is complete (versions 1..N, each the winner's
// bytes). The losers' blobs are deleted, so nothing is orphaned.
func TestConcurrentUpdatersWithIfMatch(t *testing.T) {
	const rounds = 12
	e := newEnv(t)
	e.store.MaxVersions = rounds
	ctx := context.Background()
	const key = "docs/contended"
	winners := map[int64][]byte{}
	for round := range rounds {
		base := int64(round)
		bodies := make([][]byte, 2)
		errs := make([]error, 2)
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		for w := range 2 {
			size := 100 // inline on even rounds, in S3 on odd ones
			if round%2 == 1 {
				size = 20 << 10
			}
			bodies[w] = bytes.Repeat(fmt.Appendf(nil, "round %d writer %d|", round, w), size/10+1)[:size]
			ready.Add(1)
			wg.Go(func() {
				ready.Done()
				<-start
				_, errs[w] = e.store.Put(ctx, key, bodies[w], objects.PutOptions{IfMatch: &base, NoCompress: true})
			})
		}
		ready.Wait()
		close(start)
		wg.Wait()
		var won []int
		for w, err := range errs {
			var ce *objects.ConflictError
			switch {
			case err == nil:
				won = append(won, w)
			case errors.As(err, &ce):
				if ce.Current != base+1 || ce.Expected != base {
					t.Errorf("round %d: writer %d: conflict %+v, want current %d expected %d", round, w, ce, base+1, base)
				}
			default:
				t.Fatalf("round %d: writer %d: %v", round, w, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: writers %v won, want exactly one (errors %v)", round, won, errs)
		}
		winners[base+1] = bodies[won[0]]
	}
	versions, err := e.store.Versions(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != rounds {
		t.Fatalf("%d versions, want %d", len(versions), rounds)
	}
	for i, r := range versions {
		want := int64(rounds - i)
		if r.Version != want {
			t.Fatalf("versions[%d] is %d, want %d (newest first, contiguous)", i, r.Version, want)
		}
		got, err := e.store.Get(ctx, key, want)
		if err != nil || !bytes.Equal(got.Body, winners[want]) {
			t.Fatalf("version %d: %v; body %.30q, want the winner's %.30q", want, err, got.Body, winners[want])
		}
	}
	e.mustHold(t, true)
}
