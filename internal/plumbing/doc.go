// Package plumbing groups parts with no knowledge of placement rules:
// apicontact, kubeclient, leader, logbridge, output, packed, redirects,
// tlsserve and version. They import no other group of internal/.
package plumbing
