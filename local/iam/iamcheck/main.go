// Command iamcheck reads the records the judged local stacks of a run left
// (DDBPIPE_IAM_RECORDS: each stack's policies and its distinct judged
// calls) and prints, per identity, the calls made and the actions granted.
// It fails on any denied call and on any granted action that no call used
// unless the template's Metadata ddbpipe-iam-unused says why.
//
//	go run ./local/iam/iamcheck -records build/iam      (make iam, make test)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ddbpipe/ddbpipe/local/iam"
)

func main() {
	records := flag.String("records", "build/iam", "folder of the run's records (DDBPIPE_IAM_RECORDS)")
	template := flag.String("template", "template.yaml", "the template whose Metadata documents the unused grants")
	out := flag.String("out", "", "also write the full report to this file")
	quiet := flag.Bool("q", false, "print only the summary and the failures (the full report goes to -out)")
	flag.Parse()
	if err := run(*records, *template, *out, *quiet, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "iamcheck:", err)
		os.Exit(1)
	}
}

func run(records, template, out string, quiet bool, stdout io.Writer) error {
	runs, err := iam.ReadRuns(records)
	if err != nil {
		return err
	}
	reasons, err := iam.ReadReasons(template)
	if err != nil {
		return err
	}
	rep := iam.Check(runs, reasons)
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		rep.Write(w)
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if quiet {
		fmt.Fprintf(stdout, "IAM: %d stacks judged; %d distinct (identity, action, resource pattern) calls by the functions and policies; %d denied; %d grants, %d unused without a reason\n",
			rep.Stacks, len(rep.Triples()), len(rep.Denied), len(rep.Grants), len(rep.Unused))
	} else {
		rep.Write(stdout)
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("the run's AWS calls and the template's grants disagree:\n%w", err)
	}
	return nil
}
