"""Text policy shared by the server and the families: the sentence splitter, the text carry across sentences, word
times and the forced aligner's transcript."""
