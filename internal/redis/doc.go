// Package redis groups what regosched reads from Redis itself: redisconn
// (one bounded connection, every reply's length capped before it is
// allocated) and redisroles (live roles, written onto the pods). They
// import core, plumbing and redis.
package redis
