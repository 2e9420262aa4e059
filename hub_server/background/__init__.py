"""Work off the request path: the upload worker processes and the fork server they (and dataset decodes) start from."""
