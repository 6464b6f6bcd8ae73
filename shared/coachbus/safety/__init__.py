"""Safety: what keeps a person in crisis, or heading for a risky step, from getting an
ordinary coaching reply.

Coach, Stability and Synth must give one message the same answer, and services may
not import each other, so all of it lives here. One module per concern; import a
name from the module that owns it (this package re-exports nothing):

========================  ===============================================================
``screen``                the crisis screen of one message (the deterministic tier):
                          category, measured confidence, what matched; the rules every
                          service applies to a screen (``is_crisis``,
                          ``needs_check_in``, ``review_severity``, ``merge_screens``)
``rulebook``              the screen's rules, guards, history, cues and negations, read
                          from ``content/crisis/rules.toml``
``prefilter``             which of the rule book's patterns can match a message at all,
                          read from the patterns, so the rest are not run
``calibration``           the measured confidence of each outcome, of the message
                          screen and of the conversation (``content/crisis/*.toml``)
``conversation``          risk read across the conversation: the answer to the question
                          our last reply asked, warning signs that add up
``model``                 the model tier's side: its answer's schema, its instructions,
                          the conversation it is shown, the check that it quotes the
                          person
``steps``                 the risky steps the coach must never suggest and the standing
                          conditions (an injury, an abusive partner) they depend on;
                          the reply guard's reading of a reply (``read_reply``)
``judge``                 the reply guard's model tier: a model reads a reply the rules
                          passed on a turn that blocked steps, adding only steps it
                          quotes from the reply
``helplines``             help lines per locale (``content/helplines.toml`` or an
                          operator's file), loaded once as a service starts
``replies``               the crisis reply, the check-in and the turn after a no, from
                          ``content/crisis/replies.toml`` and the help lines
``severity``              the order of the severity levels a human review is filed at
========================  ===============================================================

A turn's message is normalised once (``coachbus.normalize.NormalizedText``) and that
value is what the screens here take, so they read one form of the text and none
normalises it again.

The order of imports runs one way: ``prefilter`` → ``rulebook`` → ``screen`` (with
``calibration``) → ``conversation`` → ``model``; ``steps`` and ``model`` → ``judge``;
``helplines`` → ``replies`` and ``severity`` stand apart.
"""
