package cron

import "errors"

var (
	// ErrInvalid: an entry is malformed (name, spec, type, max retry, timeout, two
	// entries with one name) or the job it would enqueue is refused by the queue's
	// checks (then the queue's error, queue.ErrInvalid or queue.ErrPayloadTooLarge, is
	// wrapped too); the message names what is wrong. Validate, ParseEntry, Store.Add and
	// New return it.
	ErrInvalid = errors.New("cron: invalid entry")
	// ErrNotFound: no dynamic entry has that name.
	ErrNotFound = errors.New("cron: no such entry")
)
