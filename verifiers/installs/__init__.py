"""Installing environments without letting them take over: the confined install (uv into a staging
target, every file judged before it lands), the rules a package must keep, where an installed
package came from (its hub owner, its content hash), and the guard that keeps this SDK installed.

Its modules import nothing heavy: the hub's server and the shared archive checks use them too.
"""
