/*
 * Commit and restore: git is the record. A commit stages everything in
 * the sandbox's repository and commits it there; the host then takes
 * what is new into the mirror through git-remote-warren (the sandbox
 * bundles it, the host checks it: index-pack --strict, refs limited,
 * fast-forward only, nothing of the sandbox's hooks or configuration
 * runs on the host), and pushes the mirror upstream with a credential
 * that stays on the host. A restore makes the files match an old
 * version and commits that as a new one: nothing is rewritten.
 */
#include "projects/projects_internal.h"

#define COMMIT_TIMEOUT_MS (120ull * 1000)
#define DEFAULT_AUTHOR "warren <warren@localhost>"

/*
 * Inside, in $1: stage everything and commit with author $2 <$3> and
 * message $4. Prints "committed" or "clean" (nothing to commit); exit 3
 * when there is no repository.
 */
static const char commit_script[] =
    "cd \"$1\" 2>/dev/null && git rev-parse --git-dir >/dev/null 2>&1 ||"
    " exit 3\n"
    "git add -A || exit 1\n"
    "if git diff --cached --quiet; then echo clean; exit 0; fi\n"
    "git -c user.name=\"$2\" -c user.email=\"$3\" commit -q -m \"$4\" ||"
    " exit 1\n"
    "echo committed\n";

/*
 * Inside, in $1: the files and the index made to match commit $2 (files
 * that it does not have are removed; untracked and ignored ones stay),
 * then committed as by commit_script with $3 $4 $5. Exit 7 when the
 * commit is not in the sandbox's repository.
 */
static const char restore_script[] =
    "cd \"$1\" 2>/dev/null && git rev-parse --git-dir >/dev/null 2>&1 ||"
    " exit 3\n"
    "git cat-file -e \"$2^{commit}\" 2>/dev/null || exit 7\n"
    "git read-tree -u --reset \"$2\" || exit 1\n"
    "if git diff --cached --quiet HEAD; then echo clean; exit 0; fi\n"
    "git -c user.name=\"$3\" -c user.email=\"$4\" commit -q -m \"$5\" ||"
    " exit 1\n"
    "echo committed\n";

/* "Name <email>" into its two parts (in buf). */
static void split_author(const char *author, char *buf, size_t size,
                         const char **name, const char **email) {
  char *lt, *gt;

  snprintf(buf, size, "%s", author);
  lt = strchr(buf, '<');
  gt = lt ? strchr(lt, '>') : NULL;
  if (lt == NULL || gt == NULL) {
    *name = buf;
    *email = "warren@localhost";
    return;
  }
  *gt = '\0';
  *email = lt + 1;
  while (lt > buf && lt[-1] == ' ')
    lt--;
  *lt = '\0';
  *name = buf[0] ? buf : "warren";
}

static const char *author_of(const struct op *o) {
  const char *a = op_arg(o, "author", NULL);

  if (a != NULL && (strlen(a) > 200 || !wr_text_is_safe(a)))
    a = NULL;
  return a ? a : op_setting(o, "author", DEFAULT_AUTHOR);
}

/* A sandbox to commit in: a cool or cold project has none, and all of
 * it is in the mirror (or its snapshot) already. */
static int need_sandbox(struct op *o, wr_error_t *err) {
  _cleanup_json_ json_t *sb = NULL;
  int have = op_sandbox(o, &sb, err);

  if (have < 0)
    return -1;
  if (have == 0)
    return wr_error_setx(err, EBUSY,
                         "project `%s` is %s: it has no sandbox to commit "
                         "from (open it first)",
                         o->rec.name, o->rec.tier);
  return 0;
}

/* The mirror took what is new: the edit is recorded, and pushed. */
static void after_intake(struct op *o, json_t *result) {
  wr_error_t perr = {0};

  if (o->rec.remote == NULL)
    return;
  if (wr_mirror_push(o->env, o->mirror, o->rec.remote, o->rec.remote_secret,
                     &perr) < 0) {
    json_object_set_new(result, "pushed", json_false());
    json_object_set_new(result, "push_error", json_string(perr.msg));
    return;
  }
  op_step(o, "push");
  json_object_set_new(result, "pushed", json_true());
}

/* Run a script that commits (commit_script or restore_script), take the
 * result in, and say what happened. */
static int commit_with(struct op *o, const char *script, char *const *args,
                       const char *what, json_t **result, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  uint64_t version = 0;
  bool changed = false;
  int code = 0;

  if (op_script(o, script, args, COMMIT_TIMEOUT_MS, &out, &errout, &code, err) <
      0)
    return wr_error_wrap(err, "%s", what);
  if (code == 3)
    return wr_error_setx(err, ENOENT, "%s in sandbox `%s` is not a repository",
                         op_dir(o), o->sandbox);
  if (code == 7)
    return wr_error_setx(err, ENOENT,
                         "that version is not in sandbox `%s`'s repository",
                         o->sandbox);
  if (code != 0)
    return op_script_failed(o, what, code, &errout, err);
  op_step(o, what);
  if (op_intake(o, &changed, err) < 0)
    return -1;
  op_step(o, "take it into the mirror");
  if (changed) {
    o->rec.last_edit_ms = wr_now_ms();
    if (op_save(o, err) < 0)
      return -1;
  }
  if (o->rec.revision != NULL &&
      wr_mirror_count(o->env, o->mirror, o->rec.revision, &version, err) < 0)
    return -1;
  *result = op_result(o, NULL);
  json_object_set_new(*result, "committed", json_boolean(changed));
  json_object_set_new(*result, "version", json_integer((json_int_t)version));
  if (!changed)
    json_object_set_new(*result, "message",
                        json_string("nothing to commit: the files are as the "
                                    "last version"));
  else
    after_intake(o, *result);
  return 0;
}

int op_commit(struct op *o, json_t **result, wr_error_t *err) {
  const char *msg = op_arg(o, "message", NULL);
  const char *name, *email;
  char buf[256];

  if (msg == NULL || msg[0] == '\0' || strlen(msg) > 64 * 1024)
    return wr_error_setx(err, EINVAL, "a commit needs a message (-m)");
  if (need_sandbox(o, err) < 0)
    return -1;
  split_author(author_of(o), buf, sizeof(buf), &name, &email);
  char *args[] = {(char *)op_dir(o), (char *)name, (char *)email, (char *)msg,
                  NULL};
  return commit_with(o, commit_script, args, "commit", result, err);
}

int op_restore(struct op *o, json_t **result, wr_error_t *err) {
  const char *rev = op_arg(o, "revision", NULL);
  _cleanup_free_ char *commit = NULL;
  _cleanup_free_ char *msg = NULL;
  _cleanup_json_ json_t *opened = NULL;
  uint64_t version = 0;
  const char *name, *email;
  char buf[256];

  if (rev == NULL)
    return wr_error_setx(err, EINVAL, "restore needs a revision");
  if (wr_mirror_resolve(o->env, o->mirror, rev, &commit, err) < 0 ||
      wr_mirror_count(o->env, o->mirror, commit, &version, err) < 0)
    return -1;
  /* A restore is an edit: the project is opened for it. */
  if (op_open(o, &opened, err) < 0)
    return wr_error_wrap(err, "open project `%s`", o->rec.name);
  msg = op_arg(o, "message", NULL)
            ? xstrdup(op_arg(o, "message", NULL))
            : xasprintf("Restore version %llu (%.12s)",
                        (unsigned long long)version, commit);
  split_author(author_of(o), buf, sizeof(buf), &name, &email);
  char *args[] = {(char *)op_dir(o), commit, (char *)name,
                  (char *)email,     msg,    NULL};
  if (commit_with(o, restore_script, args, "restore", result, err) < 0)
    return -1;
  json_object_set_new(*result, "restored", json_integer((json_int_t)version));
  json_object_set_new(*result, "restored_commit", json_string(commit));
  return 0;
}
