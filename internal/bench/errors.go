package bench

import "errors"

// ErrInvalid: Options are malformed (unknown mode, N not positive, ...); the message names
// the field. The CLI maps it to exit code 2, bad usage.
var ErrInvalid = errors.New("bench: invalid options")
