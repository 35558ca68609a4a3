package objects_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// A read-modify-write with optimistic locking: the second writer, based on
// a version that is no longer the latest, gets a conflict that names the
// current version, and retries on top of it.
func ExampleStore_Put() {
	table := objectstest.NewTable()
	s := &objects.Store{Items: table, Chunks: table, Blobs: objectstest.NewBucket("objects")}
	ctx := context.Background()

	text := "text/plain; charset=utf-8" // each version carries its own content type
	v1, _ := s.Put(ctx, "notes/todo.txt", []byte("milk"), objects.PutOptions{ContentType: text})
	_, _ = s.Put(ctx, "notes/todo.txt", []byte("milk, eggs"), objects.PutOptions{ContentType: text, IfMatch: &v1.Version})

	_, err := s.Put(ctx, "notes/todo.txt", []byte("milk, bread"), objects.PutOptions{ContentType: text, IfMatch: &v1.Version})
	var conflict *objects.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict: now at version", conflict.Current)
		latest, _ := s.Get(ctx, "notes/todo.txt", 0)
		merged := string(latest.Body) + ", bread"
		v3, _ := s.Put(ctx, "notes/todo.txt", []byte(merged), objects.PutOptions{ContentType: text, IfMatch: &latest.Version})
		fmt.Println("stored version", v3.Version, v3.Kind)
	}
	got, _ := s.Get(ctx, "notes/todo.txt", 0)
	fmt.Printf("%s (%s)\n", got.Body, got.ContentType)
	// Output:
	// conflict: now at version 2
	// stored version 3 inline
	// milk, eggs, bread (text/plain; charset=utf-8)
}

// Placement by size and compressibility, with the default policy.
func ExamplePolicy_Place() {
	var p objects.Policy
	docs := []struct {
		name string
		body []byte
		keep bool
	}{
		{"small", []byte("hello"), false},
		{"8 KB of JSON", []byte(strings.Repeat(`{"k":"v"},`, 800)), false},
		{"60 KB of JSON", []byte(strings.Repeat(`{"k":"v"},`, 6000)), false},
		{"60 KB random", random(60<<10, 1), false},
		{"600 KB random, kept in the table", random(600<<10, 2), true},
	}
	for _, d := range docs {
		pl, _ := p.Place(len(d.body), func() int { return len(objects.Compress(d.body)) }, objects.PlaceOptions{Key: "k", KeepInTable: d.keep})
		fmt.Printf("%-33s %-10s %-8s chunks=%d\n", d.name, pl.Kind, pl.Codec, pl.Chunks)
	}
	// Output:
	// small                             inline     identity chunks=0
	// 8 KB of JSON                      compressed gzip     chunks=0
	// 60 KB of JSON                     compressed gzip     chunks=0
	// 60 KB random                      s3         identity chunks=0
	// 600 KB random, kept in the table  chunked    identity chunks=3
}
