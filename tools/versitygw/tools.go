//go:build tools

// Package tools pins the S3 server the local stack runs (versitygw), in a
// module of its own so its many dependencies stay out of the product's go.mod.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
