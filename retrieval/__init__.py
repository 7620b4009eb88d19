"""Reading the store back: which experiences to show a prompt, and what to try first.

Metadata ladder, vector and lexical search and the evidence ranking (``retrieve``,
``ladder``, ``ranking``, ``lexical``), the few-shot block (``fewshot``), insights per edit
category, and transfer to a GPU or task the store has not measured (``hardware``,
``features``, ``ranker``, ``prediction``). ``protocol.Knowledge`` is the seam the
optimizer is typed against; ``remote`` is its HTTP client.
"""
